from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from studies.views import reviewer

urlpatterns = [
    # Researchers land on their studies, reviewers on their reviews.
    path("", reviewer.landing, name="home"),
    # Before the admin's own URLs: its login page counts failed attempts like ours.
    path("admin/login/", reviewer.admin_login),
    path("admin/", admin.site.urls),
    # Rate-limited; sends owners to their studies and reviewers to their dashboard.
    path("login/", reviewer.reviewer_login, name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # allauth reverses "account_login" by that name: our rate-limited log-in page.
    path("login/", reviewer.reviewer_login, name="account_login"),
    path("accounts/", include("accounts.urls")),
    path("accounts/sso/", include("accounts.sso_urls")),
    path("studies/", include("studies.urls")),
    path("judging/", include("judging.urls")),
    path("healthz", include("studies.health_urls")),
]

handler400 = "ideareview.errors.bad_request"
