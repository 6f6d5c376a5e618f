"""The self-quiz of notebook 11: load the questions, compute their numbers, grade answers (numpy only).

The questions live in ONE data file, ``mha_course/data/quiz.json``, read by the notebook, the
widget (``mha_course.quiz_widget``) and the tests. A choice is either a string or a reference
to a package computation, so no number or shape in the file is typed by hand:

    {"compute": "param_count", "args": {"d_model": 512}}              -> "1,048,576"
    {"expr": "8 * 4 * 512 ** 2"}                                       -> a wrong choice's arithmetic
    {"compute": "stage_shape", "args": {...}, "template": "{} bytes"}  -> the value, formatted

A question may also hold ``"verify"``: a computation that must return True for its answer to
hold (e.g. ``{"compute": "tiled_equals_textbook"}``); the tests run every one.

Shapes: a Question has ``choices`` (n,) strings and one ``answer`` index in 0..n-1.

    >>> qs = load_questions()
    >>> len(qs) >= 30, grade(qs[0], qs[0].answer).correct
    (True, True)

Taught in 11_misconceptions_and_interview.ipynb.
"""
from __future__ import annotations

import ast
import json
import operator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import _validate, efficient, gqa, heads
from ..attention import causal_mask, scaled_dot_product_attention, softmax
from ..mha import count_params, init_params, multi_head_attention, trace
from ..positions import apply_rope
from . import complexity, misconceptions
from . import model as train

__all__ = ["QUIZ_PATH", "Question", "Feedback", "COMPUTE", "load_questions", "choice_value",
           "format_value", "grade", "score", "render_text", "verify"]

QUIZ_PATH = Path(__file__).resolve().parent.parent / "data" / "quiz.json"


class Question(NamedTuple):
    """One multiple-choice question: choices (n,) strings, answer index, its notebook section."""
    id: str
    notebook: str
    section: str
    question: str
    choices: tuple
    answer: int
    explanation: str
    verify: dict | None = None


class Feedback(NamedTuple):
    """The grade of one answer: correct or not, and the message shown to the learner."""
    correct: bool
    message: str


# ----------------------------------------------------------------------------- computations
def _stage_shape(stage: str, B: int, T: int, d_model: int, h: int, S: int | None = None) -> tuple:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, d_model))
    context = None if S is None else rng.normal(size=(B, S, d_model))
    return tuple(trace(x, init_params(d_model, rng=rng), h, context=context)[stage].shape)


def _params_for_every_h(d_model: int) -> bool:
    """The same MHAParams serve every h that divides d_model: 4·d_model² numbers each time."""
    p = init_params(d_model, rng=np.random.default_rng(0))
    x = np.ones((1, 2, d_model))
    runs = [multi_head_attention(x, p, h)[0].shape for h in _validate.divisors(d_model)]
    return count_params(p) == 4 * d_model ** 2 and len(set(runs)) == 1


def _tiled_equals_textbook(T: int = 40, d_k: int = 8) -> bool:
    rng = np.random.default_rng(1)
    Q, K, V = (rng.normal(size=(T, d_k)) for _ in range(3))
    return bool(np.allclose(efficient.tiled_attention(Q, K, V, causal_mask(T), block_size=7),
                            scaled_dot_product_attention(Q, K, V, causal_mask(T))[0]))


def _permutation_equivariant(T: int = 5, d_model: int = 8, h: int = 2) -> bool:
    rng = np.random.default_rng(2)
    x, perm = rng.normal(size=(1, T, d_model)), rng.permutation(T)
    p = init_params(d_model, rng=rng)
    return bool(np.allclose(multi_head_attention(x, p, h)[0][:, perm], multi_head_attention(x[:, perm], p, h)[0]))


def _rope_depends_on_offset(d_k: int = 8) -> bool:
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(2, d_k))
    score = [(apply_rope(q[None], [m]) @ apply_rope(k[None], [m - 2]).T).item() for m in (2, 5, 11)]
    return bool(np.allclose(score, score[0]))


def _narrow_heads_lose() -> bool:
    """The shipped h sweep (08): heads of d_k <= 4 end less accurate than one head of d_k = 32."""
    e = train.load_experiments()
    acc, d_k = e["h_sweep_accuracy"].mean(0), 32 // e["h_sweep_hs"]
    return bool(acc[d_k <= 4].max() < acc[0] - 0.2)


def _one_head_breaks_the_model() -> bool:
    """Silencing one head of the trained induction model costs more than half its accuracy."""
    config, params, _ = train.load_checkpoint(train.checkpoint_path("induction"))
    full = misconceptions.ablated_metrics(params, config, []).accuracy
    worst = min(misconceptions.ablated_metrics(params, config, [(layer, j)]).accuracy
                for layer in range(config.n_layers) for j in range(config.h))
    return worst < full / 2


def _sharp_head_matters_little() -> bool:
    """Some head looks sharper than another yet costs less to ablate (trained induction model)."""
    config, params, _ = train.load_checkpoint(train.checkpoint_path("induction"))
    a = misconceptions.head_attribution(params, config)
    w, cost = a["max_weight"].ravel(), a["ablation"].ravel()
    return bool(np.any((w[:, None] > w[None, :]) & (cost[:, None] < cost[None, :])))


def _masked_row_is_zero() -> bool:
    return bool(np.all(softmax(np.full((1, 4), -np.inf)) == 0))


COMPUTE = {
    "param_count": complexity.param_count,
    "stage_shape": _stage_shape,
    "d_k": lambda d_model, h: heads.split_heads(np.zeros((1, 1, d_model)), h).shape[-1],
    "valid_heads": lambda d_model: _validate.divisors(d_model),
    "attention_flops": complexity.attention_flops,
    "projection_flops": complexity.projection_flops,
    "crossover_seq_len": complexity.crossover_seq_len,
    "score_memory_bytes": lambda B, h, T, bytes_per_number=4: complexity.score_memory_bytes(
        B, h, T, dtype=np.dtype(f"f{bytes_per_number}")),
    "kv_cache_bytes_per_token": gqa.kv_cache_bytes_per_token,
    "sequential_steps": misconceptions.sequential_steps,
    "params_for_every_h": _params_for_every_h,
    "tiled_equals_textbook": _tiled_equals_textbook,
    "permutation_equivariant": _permutation_equivariant,
    "rope_depends_on_offset": _rope_depends_on_offset,
    "masked_row_is_zero": _masked_row_is_zero,
    "narrow_heads_lose": _narrow_heads_lose,
    "one_head_breaks_the_model": _one_head_breaks_the_model,
    "sharp_head_matters_little": _sharp_head_matters_little,
}

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Pow: operator.pow, ast.USub: operator.neg}


def _arith(node):
    """The value of an arithmetic expression's AST: ints, + - * // ** and tuples only."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_arith(e) for e in node.elts)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_arith(node.left), _arith(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_arith(node.operand))
    raise ValueError(f"{ast.dump(node)} is not integer arithmetic; quiz expressions use ints, + - * // ** "
                     "and tuples only")


def choice_value(choice):
    """A choice as stored (str, {"compute": ...} or {"expr": ...}) -> its value (str, int, tuple, ...).

    >>> choice_value({"compute": "param_count", "args": {"d_model": 8}}), choice_value({"expr": "3 * 8 ** 2"})
    (256, 192)
    """
    if isinstance(choice, str):
        return choice
    if "expr" in choice:
        return _arith(ast.parse(choice["expr"], mode="eval").body)
    if choice.get("compute") not in COMPUTE:
        raise ValueError(f"unknown computation {choice.get('compute')!r}; known: {', '.join(sorted(COMPUTE))}")
    return COMPUTE[choice["compute"]](**choice.get("args", {}))


def format_value(value, template: str = "{}") -> str:
    """A value -> its text: ints with thousands separators, tuples as shapes, lists joined.

    >>> format_value(1048576), format_value((2, 4, 5, 5)), format_value([1, 2, 4], "h in {}")
    ('1,048,576', '(2, 4, 5, 5)', 'h in 1, 2, 4')
    """
    if isinstance(value, (bool, np.bool_)):
        text = str(bool(value))
    elif isinstance(value, (int, np.integer)):
        text = f"{int(value):,}"
    elif isinstance(value, list):
        text = ", ".join(format_value(v) for v in value)
    else:
        text = str(tuple(int(v) for v in value)) if isinstance(value, tuple) else str(value)
    return template.format(text)


def _choice_text(choice) -> str:
    template = "{}" if isinstance(choice, str) else choice.get("template", "{}")
    return format_value(choice_value(choice), template)


def _question(raw: dict) -> Question:
    choices = tuple(_choice_text(c) for c in raw["choices"])
    if not 0 <= raw["answer"] < len(choices):
        raise ValueError(f"question {raw['id']!r}: answer={raw['answer']} is not an index of its "
                         f"{len(choices)} choices; use 0..{len(choices) - 1}")
    return Question(raw["id"], raw["notebook"], raw["section"], raw["question"], choices, raw["answer"],
                    raw["explanation"], raw.get("verify"))


def load_raw(path=None) -> list[dict]:
    """path (default QUIZ_PATH) -> the questions as stored (dicts, choices not yet computed)."""
    return json.loads(Path(QUIZ_PATH if path is None else path).read_text(encoding="utf-8"))["questions"]


def load_questions(path=None) -> list[Question]:
    """path (default QUIZ_PATH) -> [Question]: every choice computed and formatted as text."""
    return [_question(raw) for raw in load_raw(path)]


def verify(question: Question) -> bool:
    """Question -> True when its ``verify`` computation holds (or it has none)."""
    return True if question.verify is None else bool(choice_value(question.verify))


def grade(question: Question, choice: int) -> Feedback:
    """Question, chosen index -> Feedback (correct?, a message naming the right answer and why).

    >>> q = Question("q", "04", "4", "Params for h = 8?", ("4·D²", "8·4·D²"), 0, "Same for any h.")
    >>> grade(q, 1)
    Feedback(correct=False, message='Not quite: the answer is "4·D²". Same for any h.')
    """
    if not 0 <= choice < len(question.choices):
        raise ValueError(f"choice={choice} is not one of the {len(question.choices)} choices of {question.id!r}; "
                         f"use 0..{len(question.choices) - 1}")
    if choice == question.answer:
        return Feedback(True, f"Right. {question.explanation}")
    return Feedback(False, f'Not quite: the answer is "{question.choices[question.answer]}". {question.explanation}')


def score(questions, answers: dict) -> tuple[int, int]:
    """questions [Question], answers {id: chosen index} -> (correct, answered).

    >>> q = Question("q", "04", "4", "?", ("a", "b"), 1, "")
    >>> score([q], {"q": 1}), score([q], {})
    ((1, 1), (0, 0))
    """
    by_id = {q.id: q for q in questions}
    graded = [grade(by_id[i], c).correct for i, c in answers.items()]
    return sum(graded), len(graded)


def render_text(questions) -> str:
    """[Question] -> the quiz as plain text: numbered questions, lettered choices, the answers at the end."""
    lines, key = [], []
    for n, q in enumerate(questions, 1):
        lines.append(f"{n}. {q.question}  [{q.notebook} §{q.section}]")
        lines += [f"   {'abcdefgh'[i]}) {c}" for i, c in enumerate(q.choices)]
        key.append(f"{n}{'abcdefgh'[q.answer]}")
    return "\n".join(lines + ["", "answers: " + " ".join(key)])
