"""Grading: the agent's JSON answer against the task's rule, and the live page where the task says so."""

from .answer import AnswerError, parse_answer
from .grade import Grade, grade_trial

__all__ = ["AnswerError", "Grade", "grade_trial", "parse_answer"]
