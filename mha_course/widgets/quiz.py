"""The self-quiz as a widget (ipywidgets): one question at a time, instant feedback, a score.

Every decision is made by the pure functions of ``mha_course.quiz`` (``grade``, ``score``); the
widget only shows them. Its callbacks are plain methods, so tests call them directly:

    >>> w = QuizWidget()
    >>> fb = w.answer(w.questions[0].answer)   # what clicking the right choice does
    >>> fb.correct, w.score_text().startswith("score: 1 / 1 answered")
    (True, True)

Taught in 11_misconceptions_and_interview.ipynb.
"""
from __future__ import annotations

import html

import ipywidgets as widgets

from .. import _validate
from ..lessons import quiz

__all__ = ["QuizWidget"]


class QuizWidget:
    """A multiple-choice quiz over ``questions`` (default: every question of data/quiz.json).

    ``answer(i)`` grades choice i of the current question; ``go(n)`` (n in 0 .. N - 1), ``next()``,
    ``previous()`` (these two go round) move between questions; ``reset()`` clears the answers. ``widget`` is the box to display.
    """

    def __init__(self, questions=None):
        if questions is not None and (isinstance(questions, (str, bytes)) or not isinstance(questions, (list, tuple))
                                      or not all(isinstance(q, quiz.Question) for q in questions)):
            raise ValueError(f"questions must be a list of quiz.Question, got {type(questions).__name__} "
                             f"{questions!r:.60}; pass quiz.load_questions() or leave it out for every question")
        self.questions = list(quiz.load_questions() if questions is None else questions)
        if not self.questions:
            raise ValueError("QuizWidget needs at least one question; pass quiz.load_questions()")
        self.answers: dict = {}
        self.current = 0
        self._title, self._feedback, self._score = widgets.HTML(), widgets.HTML(), widgets.HTML()
        self._choices = widgets.RadioButtons(options=[], value=None, layout=widgets.Layout(width="auto"))
        self._choices.observe(self._on_choice, names="value")
        prev, nxt = widgets.Button(description="◀ previous"), widgets.Button(description="next ▶")
        prev.on_click(lambda _: self.previous())
        nxt.on_click(lambda _: self.next())
        self.widget = widgets.VBox([self._score, self._title, self._choices, self._feedback,
                                    widgets.HBox([prev, nxt])])
        self.go(0)

    def _on_choice(self, change) -> None:
        if change["new"] is not None:
            self.answer(self.question.choices.index(change["new"]))

    @property
    def question(self) -> quiz.Question:
        return self.questions[self.current]

    def answer(self, choice: int) -> quiz.Feedback:
        """Grade choice ``choice`` of the current question; show the feedback and the new score."""
        choice = quiz.choice_index(self.question, choice)  # 1.0 is choice 1; True or 1.5 raise ValueError
        fb = quiz.grade(self.question, choice)
        self.answers[self.question.id] = choice
        colour = "#1a7f37" if fb.correct else "#b35900"
        self._feedback.value = f'<span style="color:{colour}">{html.escape(fb.message)}</span>'
        self._score.value = f"<b>{html.escape(self.score_text())}</b>"
        return fb

    def score_text(self) -> str:
        """'score: right / answered answered (N questions)'."""
        right, answered = quiz.score(self.questions, self.answers)
        return f"score: {right} / {answered} answered ({len(self.questions)} questions)"

    def go(self, n: int) -> None:
        """Show question ``n`` (0 .. len(questions) - 1; anything else is refused, naming the range), with its
        earlier answer if there was one."""
        self.current = _validate.index(n, len(self.questions), "n", "questions")
        q = self.question
        self._title.value = (f"<b>{self.current + 1}. {html.escape(q.question)}</b> "
                             f"<small>({q.notebook} §{q.section})</small>")
        self._choices.unobserve(self._on_choice, names="value")
        self._choices.options, self._choices.value = q.choices, None
        self._choices.observe(self._on_choice, names="value")
        self._feedback.value = ""
        if q.id in self.answers:
            self._choices.value = q.choices[self.answers[q.id]]  # re-grades and shows the feedback
        self._score.value = f"<b>{html.escape(self.score_text())}</b>"

    def next(self) -> None:
        """The next question; after the last, the first (the buttons go round)."""
        self.go((self.current + 1) % len(self.questions))

    def previous(self) -> None:
        """The previous question; before the first, the last."""
        self.go((self.current - 1) % len(self.questions))

    def reset(self) -> None:
        """Forget every answer and go back to the first question."""
        self.answers.clear()
        self.go(0)

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)
