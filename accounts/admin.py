"""Django's admin for single sign-on's rows. Providers come from the environment
(IDEAREVIEW_SSO_PROVIDERS), never from rows, and provider tokens are not stored, so
allauth's pages for those are removed; linked identities keep theirs (studies/admin.py
gives it the project's depth-limited JSON reader)."""

from allauth.socialaccount.models import SocialApp, SocialToken
from django.contrib import admin

for model in (SocialApp, SocialToken):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
