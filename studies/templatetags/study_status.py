"""The study's status as a person reads it, for the header of every owner page.

The header is included by pages whose views pass only the study, so the status comes
from a tag rather than from each view's context: one rule (`overview.study_status`) for
the label and for whether "Open for review" is offered.
"""

from __future__ import annotations

from django import template

from ..models import Study
from ..status import StudyStatus, study_status

register = template.Library()


@register.simple_tag
def study_status_of(study: Study) -> StudyStatus:
    return study_status(study)
