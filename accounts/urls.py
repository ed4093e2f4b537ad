from django.urls import path

from . import views

app_name = "accounts"

urlpatterns = [
    path("invitation/<str:token>/", views.invitation_open, name="invitation_open"),
    path("signup/", views.signup, name="signup"),
    path("signup/sent/", views.signup_sent, name="signup_sent"),
    path("password/reset/", views.password_reset, name="password_reset"),
    path("password/reset/sent/", views.password_reset_done, name="password_reset_done"),
    path(
        "password/reset/<uidb64>/<token>/",
        views.password_reset_confirm,
        name="password_reset_confirm",
    ),
    path("password/reset/done/", views.password_reset_complete, name="password_reset_complete"),
    path("researchers/", views.researcher_list, name="researchers"),
    path("researchers/signup/<int:request_id>/", views.signup_decide, name="signup_decide"),
    path(
        "researchers/invitation/<int:invitation_id>/revoke/",
        views.invitation_revoke,
        name="invitation_revoke",
    ),
    path(
        "researchers/<int:user_id>/deactivate/",
        views.researcher_deactivate_view,
        name="researcher_deactivate",
    ),
    path(
        "researchers/<int:user_id>/reactivate/",
        views.researcher_reactivate_view,
        name="researcher_reactivate",
    ),
]
