"""The self-quiz (mha_course.quiz, quiz_widget) and its one data file, mha_course/data/quiz.json.

- Every question has exactly one correct choice, its choices differ, and its link names a
  section that exists in the notebook it cites; every lesson 00-12 is asked about.
- Every computed answer is recomputed here by ANOTHER route through the package (a forward
  pass, a shape, a loop), so a wrong computation or a wrong answer index fails; every
  ``verify`` claim holds. A copy of the data file with a wrong answer index is caught.
- grade / score / render_text; the expression evaluator refuses anything but arithmetic.
- The widget's callbacks, called directly: answering, moving, revisiting, resetting.
- Notebook 11 shows every question of the file (the interview set is generated from it).
"""
from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import mha_course as mc
from mha_course.lessons import misconceptions, quiz

ROOT = Path(__file__).resolve().parents[2]
RAW = quiz.load_raw()
QUESTIONS = quiz.load_questions()


def _shape(stage, B, T, d_model, h, S=None):
    """A stage's shape from a forward pass (not from the Trace the quiz uses)."""
    rng = np.random.default_rng(5)
    x, p = rng.normal(size=(B, T, d_model)), mc.init_params(d_model, rng=rng)
    context = None if S is None else rng.normal(size=(B, S, d_model))
    out, weights = mc.multi_head_attention(x, p, h, context=context)
    concat = mc.combine_heads(mc.split_heads(out, h))
    return {"weights": weights.shape, "scores": weights.shape, "concat": concat.shape}[stage]


def _valid_heads(d_model):
    ok = []
    for h in range(1, d_model + 2):
        try:
            mc.multi_head_attention(np.ones((1, 2, d_model)), mc.init_params(d_model, rng=np.random.default_rng(0)), h)
            ok.append(h)
        except ValueError:
            pass
    return ok


def _crossover(d_model):
    from mha_course.lessons import complexity
    T = 1
    while complexity.attention_flops(T, d_model) < complexity.projection_flops(T, d_model):
        T += 1
    return T


def _rope_divisors(d_k, factor, kind):
    """The angle pairs 0 and d_k/2 - 1 turn through from position 0 to 1, read off apply_rope, plain over scaled."""
    x = np.zeros((2, d_k))
    x[:, 0::2] = 1.0  # (cos, sin) = (1, 0) in every interleaved pair
    def angles(scaling):
        r = mc.apply_rope(x, [0, 1], scaling=scaling)[1]  # (d_k,): position 1
        return np.arctan2(r[1::2], r[0::2])  # (d_k/2,)
    ratio = angles(None) / angles({"type": kind, "factor": factor})
    return int(round(float(ratio[0]))), int(round(float(ratio[-1])))


def _rolling_keys(window, sinks, position):
    return min(window, position + 1) + min(sinks, max(0, position + 1 - window))  # the window, then the sinks before it


INDEPENDENT = {
    "rope_frequency_divisors": _rope_divisors,
    "yarn_score_factor": lambda factor, original_max_position: f"{(0.1 * math.log(factor) + 1) ** 2:.3f}",
    "rolling_keys": _rolling_keys,
    "paged_blocks": lambda block_size, tokens: (-(-tokens // block_size), -(-tokens // block_size) * block_size - tokens),
    "merged_output": lambda totals, outs: f"{sum(t * o for t, o in zip(totals, outs)) / sum(totals):.1f}",
    "quantized_kv_bytes_per_token": lambda layers, h_kv, d_k, bits: 2 * layers * h_kv * (d_k * bits // 8 + 2),
    "alibi_inverse_slope": lambda h, head: 2 ** (8 * (head + 1) // h),  # Press et al.: 2^(-8/h) per head, h a power of 2
    "param_count": lambda d_model: mc.count_params(mc.init_params(d_model, rng=np.random.default_rng(0))),
    "stage_shape": _shape,
    "d_k": lambda d_model, h: mc.split_heads(np.zeros((1, 3, d_model)), h).shape[-1],
    "valid_heads": _valid_heads,
    "attention_flops": lambda T, d_model: 2 * (2 * T * T * d_model),  # Q Kᵀ and weights·V, 2 FLOPs per multiply-add
    "crossover_seq_len": _crossover,
    "score_memory_bytes": lambda B, h, T: math.prod((B, h, T, T)) * np.dtype(np.float32).itemsize,
    "kv_cache_bytes_per_token": lambda layers, h_kv, d_k: 2 * layers * h_kv * d_k * 2,  # K and V, 2 bytes each
    "sequential_steps": lambda T: (misconceptions.rnn_scan(np.zeros((1, T, 2)), np.eye(2), np.eye(2))[1], 1),
}


def _expected(choice):
    return INDEPENDENT[choice["compute"]](**choice.get("args", {}))


def computed_answer_problems(raw_questions) -> list[str]:
    """What is wrong with the computed answers of ``raw_questions`` (empty when all are right)."""
    problems = []
    for q in raw_questions:
        answer = q["choices"][q["answer"]]
        if isinstance(answer, dict) and "compute" in answer:
            if quiz.choice_value(answer) != _expected(answer):
                problems.append(f"{q['id']}: {quiz.choice_value(answer)} != {_expected(answer)}")
        for i, c in enumerate(q["choices"]):
            numeric = isinstance(c, dict)
            if numeric and i != q["answer"] and any(
                    isinstance(a, dict) and "compute" in a and quiz.choice_value(c) == _expected(a) for a in q["choices"]):
                problems.append(f"{q['id']}: choice {i} equals the computed answer")
    return problems


def test_at_least_thirty_questions_with_unique_ids():
    ids = [q.id for q in QUESTIONS]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("q", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_exactly_one_correct_choice(q):
    assert len(set(q.choices)) == len(q.choices) >= 3, q.choices
    assert 0 <= q.answer < len(q.choices)
    assert [quiz.grade(q, i).correct for i in range(len(q.choices))].count(True) == 1


def test_numbers_and_shapes_are_computed_not_typed():
    for q in RAW:
        answer = q["choices"][q["answer"]]
        if isinstance(answer, str):
            assert not re.fullmatch(r"[\d,\s()x]+", answer), f"{q['id']}: a typed number/shape {answer!r}"


def test_every_computed_answer_agrees_with_the_package_by_another_route():
    assert computed_answer_problems(RAW) == []
    assert sum(isinstance(q["choices"][q["answer"]], dict) for q in RAW) >= 10


def test_a_wrong_answer_index_is_caught():
    broken = copy.deepcopy(RAW)
    q = next(q for q in broken if isinstance(q["choices"][q["answer"]], dict))
    q["answer"] = (q["answer"] + 1) % len(q["choices"])
    assert computed_answer_problems(broken), "moving the answer to a distractor must be caught"


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q.verify], ids=lambda q: q.id)
def test_every_claim_the_answer_rests_on_holds(q):
    assert quiz.verify(q)


def _headings(stem: str) -> list[str]:
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    return [line[3:] for c in cells if c["cell_type"] == "markdown"
            for line in "".join(c["source"]).splitlines() if line.startswith("## ")]


@pytest.mark.parametrize("q", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_every_link_names_an_existing_section(q):
    starts = [re.match(r"(\d+)\s*[.·]", h) for h in _headings(q.notebook)]
    assert q.section in {m.group(1) for m in starts if m}, f"{q.notebook} has no section {q.section}"


def test_every_lesson_is_asked_about():
    lessons = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert lessons <= {q.notebook for q in QUESTIONS}


@pytest.mark.parametrize("stem", ["13_long_context", "14_circuits"])
def test_the_long_context_and_circuits_lessons_have_three_answers_the_package_recomputes(stem):
    """Each of 13 and 14 is asked about at least three times, and every answer there is either computed
    by the package (a number, a shape) or rests on a claim that `verify` recomputes from shipped results."""
    raw = [q for q in RAW if q["notebook"] == stem]
    assert len(raw) >= 3, [q["id"] for q in raw]
    typed = [q["id"] for q in raw if not (isinstance(q["choices"][q["answer"]], dict) or "verify" in q)]
    assert not typed, f"{stem}: answers neither computed nor verified: {typed}"


def test_notebook_11_shows_every_question_of_the_file():
    text = (ROOT / "notebooks" / "11_misconceptions_and_interview.ipynb").read_text(encoding="utf-8")
    missing = [q.id for q in QUESTIONS if json.dumps(q.question, ensure_ascii=False)[1:-1] not in text]
    assert not missing, f"notebook 11 lacks questions {missing}: re-generate its interview set"


# ----------------------------------------------------------------------------- grading
Q = quiz.Question("q", "04_concat_output", "4", "Params?", ("4·D²", "h·4·D²", "3·D²"), 0, "Same for any h.")


def test_grade_right_and_wrong():
    assert quiz.grade(Q, 0) == quiz.Feedback(True, "Right. Same for any h.")
    wrong = quiz.grade(Q, 2)
    assert not wrong.correct and '"4·D²"' in wrong.message and "Same for any h." in wrong.message


@pytest.mark.parametrize("bad", [-1, 3])
def test_grade_refuses_a_choice_out_of_range(bad):
    with pytest.raises(ValueError, match=rf"choice={bad} .*use 0..2"):
        quiz.grade(Q, bad)


def test_score_counts_right_and_answered():
    other = Q._replace(id="r", answer=1)
    assert quiz.score([Q, other], {"q": 0, "r": 0}) == (1, 2)
    assert quiz.score([Q, other], {}) == (0, 0)


def test_render_text_lists_choices_and_the_key():
    text = quiz.render_text([Q])
    assert "1. Params?  [04_concat_output §4]" in text and "   c) 3·D²" in text and text.endswith("answers: 1a")


@pytest.mark.parametrize("expr", ["__import__('os')", "x + 1", "2 ** 3 / 2", "len((1,))", "1.5 * 2"])
def test_expressions_are_arithmetic_only(expr):
    with pytest.raises(ValueError, match="integer arithmetic"):
        quiz.choice_value({"expr": expr})


def test_expressions_and_unknown_computations():
    assert quiz.choice_value({"expr": "(2, 4 * 3, -1)"}) == (2, 12, -1)
    with pytest.raises(ValueError, match="unknown computation 'nope'; known: "):
        quiz.choice_value({"compute": "nope"})


def test_a_data_file_with_an_answer_out_of_range_is_refused(tmp_path):
    path = tmp_path / "quiz.json"
    path.write_text(json.dumps({"questions": [dict(RAW[0], answer=9)]}), encoding="utf-8")
    with pytest.raises(ValueError, match="answer=9 is not an index"):
        quiz.load_questions(path)


@pytest.mark.parametrize("value, template, text", [
    (1048576, "{}", "1,048,576"), ((2, 4, 5, 5), "{}", "(2, 4, 5, 5)"), ([1, 2, 3], "h in {}", "h in 1, 2, 3"),
    (np.int64(7), "{} bytes", "7 bytes"), (True, "{}", "True"), ("text", "{}", "text")])
def test_format_value(value, template, text):
    assert quiz.format_value(value, template) == text














# ---------------------------------------------------------------- bad quiz files and answers
def _write(tmp_path, questions=None, text=None):
    path = tmp_path / "quiz.json"
    path.write_text(text if text is not None else json.dumps({"questions": questions}), encoding="utf-8")
    return path


def _one(**change):
    q = {"id": "q1", "notebook": "00", "section": "1", "question": "?", "choices": ["a", "b"], "answer": 0,
         "explanation": "because"}
    q.update(change)
    return {k: v for k, v in q.items() if v is not None}


@pytest.mark.parametrize("bad, words", [
    (_one(explanation=None), ["question 1 ('q1')", "has no 'explanation'", "add it"]),
    (_one(answer="1"), ["answer='1' is not an index", "no quotes"]),
    (_one(answer=True), ["answer=True is not an index"]),
    (_one(choices=["a", 3]), ["choice 1 is 3", '{"expr": "3"}']),
    (_one(choices=[str(i) for i in range(9)]), ["has 9 choices", "2 to 8 choices"]),
    (_one(choices=["a", {"expr": "9 ** 9 ** 99"}]), ["exceeds 10**30"]),
    (_one(choices=["a", {"expr": "10 ** 20 * 10 ** 20"}]), ["exceeds 10**30"]),
    (_one(choices=["a", {"expr": "2 ** -1"}]), ["exceeds 10**30"]),
    (_one(choices=["a", {"expr": "1 +"}]), ["is not a Python expression"]),
    (_one(choices=["a", {"expr": "__import__('os')"}]), ["is not integer arithmetic"]),
])
def test_a_bad_question_is_one_value_error_naming_the_file_and_the_fix(tmp_path, bad, words):
    import time
    path = _write(tmp_path, [bad])
    start = time.monotonic()
    with pytest.raises(ValueError) as err:
        quiz.load_questions(path)
    assert time.monotonic() - start < 2
    assert str(path) in str(err.value) and all(w in str(err.value) for w in words), str(err.value)


def test_invalid_json_is_a_value_error_with_its_place(tmp_path):
    path = _write(tmp_path, text='{"questions": [ {"id": "q1",, } ]}')
    with pytest.raises(ValueError, match=r"is not valid JSON: .* at line 1, column \d+"):
        quiz.load_questions(path)


def test_grade_refuses_a_bool_and_accepts_a_whole_float():
    q = quiz.Question("q", "04", "4", "?", ("a", "b"), 1, "")
    with pytest.raises(ValueError, match="choice=True is not one of the 2 choices"):
        quiz.grade(q, True)
    with pytest.raises(ValueError, match="choice=1.5"):
        quiz.grade(q, 1.5)
    assert quiz.grade(q, 1.0).correct and quiz.grade(q, np.int64(1)).correct


def test_score_with_an_unknown_id_names_it():
    q = quiz.Question("q", "04", "4", "?", ("a", "b"), 1, "")
    with pytest.raises(ValueError, match="unknown question ids 'nope'"):
        quiz.score([q], {"nope": 0})




def test_notebook_11s_interview_set_is_the_file_rendered():
    """The interview set in 11 is ``interview_markdown`` of the quiz file: it cannot drift from the quiz."""
    nb = json.loads((ROOT / "notebooks" / "11_misconceptions_and_interview.ipynb").read_text(encoding="utf-8"))
    texts = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    cells = quiz.interview_markdown(QUESTIONS, ROOT / "notebooks")
    start = texts.index(cells[0])
    assert texts[start:start + len(cells)] == cells


def test_every_interview_link_lands_on_a_heading():
    for q in QUESTIONS:
        assert quiz.section_anchor(ROOT / "notebooks" / f"{q.notebook}.ipynb", q.section), (q.id, q.notebook, q.section)
    assert quiz.section_anchor(ROOT / "notebooks" / "01_qkv.ipynb", "99") is None
    with pytest.raises(ValueError, match="per_cell"):
        quiz.interview_markdown(QUESTIONS, ROOT / "notebooks", per_cell=0)


@pytest.mark.parametrize("call, word", [
    (lambda: quiz.grade(None, 0), "question"),
    (lambda: quiz.score("spam", {}), "questions"),
    (lambda: quiz.score([Q], [0]), "answers"),
    (lambda: quiz.render_text([Q, "x"]), r"questions\[1\]"),
    (lambda: quiz.choice_value("spam"), "choice"),
    (lambda: quiz.format_value(None), "value"),
    (lambda: quiz.section_anchor("no-such.ipynb", "1"), "notebook="),
    (lambda: quiz.section_anchor(ROOT / "notebooks" / "01_qkv.ipynb", 3), "section"),
    (lambda: quiz.interview_markdown(QUESTIONS, "no-such-folder"), "notebooks_dir"),
])
def test_bad_arguments_are_named_at_the_entry(call, word):
    with pytest.raises((ValueError, TypeError), match=word):
        call()


# --- a template holds exactly one {} field
@pytest.mark.parametrize("template, match", [("{x}", r"exactly one \{\} field.*\['\{x\}'\]"),
                                             ("{} and {}", "it has 2"), ("{", "no format string"),
                                             ("h", "it has 0"), (None, "must be a string")])
def test_format_value_checks_its_template(template, match):
    with pytest.raises((ValueError, TypeError), match=match):  # "{x}" was KeyError: 'x'
        quiz.format_value(3, template)
    assert quiz.format_value(1024, "{} bytes") == "1,024 bytes"


def test_format_value_refuses_a_tuple_that_is_no_shape():
    with pytest.raises(TypeError, match="not a shape of whole numbers"):
        quiz.format_value((2.5, 3))  # was silently (2, 3)


@pytest.mark.parametrize("choice, match", [
    ({"compute": "param_count", "arg": {"d_model": 8}}, r"unknown keys \['arg'\]; a computed choice holds 'compute', 'args'"),
    ({"compute": "param_count", "args": {"dmodel": 8}}, r"do not fit the computation 'param_count', which takes \(d_model"),
    ({"compute": ["param_count"]}, "unknown computation"),  # unhashable: was a raw TypeError
])
def test_choice_value_refuses_misspelled_keys_and_argument_names(choice, match):
    with pytest.raises(ValueError, match=match):  # args' misspelling was Python's "unexpected keyword argument"
        quiz.choice_value(choice)
