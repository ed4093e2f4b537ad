from django.urls import path

from . import views

app_name = "judging"

urlpatterns = [
    path("<slug:slug>/", views.judging_home, name="home"),
    path("<slug:slug>/judges/new/", views.judge_config_new, name="config_create"),
    path(
        "<slug:slug>/judges/<int:config_id>/delete/",
        views.judge_config_remove,
        name="config_delete",
    ),
    path("<slug:slug>/judges/<int:config_id>/", views.judge_config_detail, name="config_detail"),
    path(
        "<slug:slug>/judges/<int:config_id>/reliability.csv",
        views.judge_config_reliability_csv,
        name="config_reliability_csv",
    ),
    path("<slug:slug>/keys/", views.endpoint_key_new, name="key_create"),
    path("<slug:slug>/keys/<int:key_id>/delete/", views.endpoint_key_remove, name="key_delete"),
    path("<slug:slug>/runs/new/", views.judge_run_new, name="run_create"),
    path("<slug:slug>/runs/<int:run_id>/", views.judge_run_detail, name="run_detail"),
    path("<slug:slug>/runs/<int:run_id>/cancel/", views.judge_run_cancel_view, name="run_cancel"),
    path(
        "<slug:slug>/runs/<int:run_id>/reliability.csv",
        views.judge_run_reliability_csv,
        name="run_reliability_csv",
    ),
    path("<slug:slug>/runs/<int:run_id>/resume/", views.judge_run_resume_view, name="run_resume"),
    path("<slug:slug>/references/", views.reference_corpora, name="corpora"),
]
