"""widgets/quiz.py: the self-quiz widget of notebook 11 grades, scores and moves as lessons.quiz says."""
import pytest

from mha_course.lessons import quiz

QUESTIONS = quiz.load_questions()
Q = quiz.Question("q", "04_concat_output", "4", "Params?", ("4·D²", "h·4·D²", "3·D²"), 0, "Same for any h.")


def _widget():
    pytest.importorskip("ipywidgets")
    from mha_course.widgets.quiz import QuizWidget
    return QuizWidget([Q, Q._replace(id="r", question="Second?", answer=1)])


def test_widget_answers_give_feedback_and_score():
    w = _widget()
    assert not w.answer(1).correct and "Not quite" in w._feedback.value
    assert w.score_text() == "score: 0 / 1 answered (2 questions)"
    w.next()
    assert w.answer(1).correct and "Right." in w._feedback.value
    assert "score: 1 / 2 answered" in w._score.value


def test_widget_clicking_a_choice_grades_it():
    w = _widget()
    w._choices.value = "3·D²"  # what a click does
    assert w.answers == {"q": 2}


def test_widget_moves_wrap_and_revisits_show_the_earlier_answer():
    w = _widget()
    w.answer(0)
    w.next()
    assert w._choices.value is None and w._feedback.value == "" and w.current == 1
    w.next()
    assert w.current == 0 and w._choices.value == "4·D²" and "Right." in w._feedback.value
    w.previous()
    assert w.current == 1 and "Second?" in w._title.value


def test_widget_reset_and_empty():
    w = _widget()
    w.answer(0)
    w.reset()
    assert w.answers == {} and w.current == 0 and "score: 0 / 0" in w._score.value
    from mha_course.widgets.quiz import QuizWidget
    with pytest.raises(ValueError, match="at least one question"):
        QuizWidget([])


def test_widget_defaults_to_the_data_file():
    pytest.importorskip("ipywidgets")
    from mha_course.widgets.quiz import QuizWidget
    assert [q.id for q in QuizWidget().questions] == [q.id for q in QUESTIONS]


def test_the_widget_survives_a_float_answer_and_moving_around():
    pytest_widgets = pytest.importorskip("ipywidgets")
    assert pytest_widgets
    from mha_course.widgets.quiz import QuizWidget
    w = QuizWidget()
    w.answer(1.0)
    w.next()
    w.previous()
    assert w.answers[w.question.id] == 1 and type(w.answers[w.question.id]) is int
    with pytest.raises(ValueError):
        w.answer(True)



@pytest.mark.parametrize("questions", ["spam", 3, [Q, "not a question"]])
def test_widget_refuses_questions_that_are_not_questions(questions):
    pytest.importorskip("ipywidgets")
    from mha_course.widgets.quiz import QuizWidget
    with pytest.raises(ValueError, match="questions must be a list of quiz.Question"):
        QuizWidget(questions)  # was AttributeError: 'str' object has no attribute 'question'


def test_widget_go_refuses_what_is_no_question_index_and_keeps_its_state():
    w = _widget()
    w.go(1)
    w.answer(0)
    before = (w.current, w.score_text(), dict(w.answers))
    for bad in (0.5, True, "1"):
        with pytest.raises(ValueError, match="n=.* must be a whole number"):
            w.go(bad)
    for bad in (2, -1, 10**6):  # out of range: refused, naming the range (was wrapped: 10**6 % 2 == 0)
        with pytest.raises(ValueError, match=rf"n={bad} is out of range: there are 2 questions; pass n in 0\.\.1"):
            w.go(bad)
    assert (w.current, w.score_text(), dict(w.answers)) == before


def test_next_and_previous_go_round():
    w = _widget()
    w.previous()
    assert w.current == 1
    w.next()
    assert w.current == 0
