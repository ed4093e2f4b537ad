"""The URL names allauth's sign-on flow reverses without a namespace, pointed at our
pages (allauth's own account and sign-up pages are not mounted), and the OpenID Connect
provider's login and callback URLs."""

from django.urls import include, path

from . import views

urlpatterns = [
    path("", include("allauth.socialaccount.providers.openid_connect.urls")),
    path("cancelled/", views.sso_page, {"kind": "cancelled"}, name="socialaccount_login_cancelled"),
    path("error/", views.sso_page, {"kind": "error"}, name="socialaccount_login_error"),
    path("signup/", views.sso_page, {"kind": "signup"}, name="socialaccount_signup"),
    path("inactive/", views.sso_page, {"kind": "inactive"}, name="account_inactive"),
    path("connections/", views.sso_page, {"kind": "error"}, name="socialaccount_connections"),
]
