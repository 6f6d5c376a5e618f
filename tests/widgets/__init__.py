"""Tests of mha_course/widgets/, one file per module (tests/widgets/test_<stem>.py)."""
