"""The self-quiz of notebook 11: load the questions, compute their numbers, grade answers (numpy only).

The questions live in ONE data file, ``mha_course/data/quiz.json``, read by the notebook, the
widget (``mha_course.widgets.quiz``) and the tests. A choice is either a string or a reference
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
import inspect
import json
import math
import operator
import string
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import _validate, efficient, gqa, heads, positions
from ..attention import causal_mask, scaled_dot_product_attention, softmax
from ..mha import count_params, init_params, multi_head_attention, trace
from ..positions import apply_rope
from . import checkpoints, circuits, complexity, long_context, misconceptions

__all__ = ["QUIZ_PATH", "MAX_CHOICES", "Question", "Feedback", "COMPUTE", "load_questions", "choice_value",
           "format_value", "choice_index", "grade", "score", "render_text", "verify", "section_anchor",
           "interview_markdown"]

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
    runs = [multi_head_attention(x, p, h)[0].shape for h in heads.valid_heads(d_model)]
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
    e = checkpoints.load_experiments()
    acc, d_k = e["h_sweep_accuracy"].mean(0), 32 // e["h_sweep_hs"]
    return bool(acc[d_k <= 4].max() < acc[0] - 0.2)


def _one_head_breaks_the_model() -> bool:
    """Silencing one head of the trained induction model costs more than half its accuracy."""
    config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    full = misconceptions.ablated_metrics(params, config, []).accuracy
    worst = min(misconceptions.ablated_metrics(params, config, [(layer, j)]).accuracy
                for layer in range(config.n_layers) for j in range(config.h))
    return worst < full / 2


def _sharp_head_matters_little() -> bool:
    """Some head looks sharper than another yet costs less to ablate (trained induction model)."""
    config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    a = misconceptions.head_attribution(params, config)
    w, cost = a["max_weight"].ravel(), a["ablation"].ravel()
    return bool(np.any((w[:, None] > w[None, :]) & (cost[:, None] < cost[None, :])))


def _rope_frequency_divisors(d_k: int, factor: float, kind: str) -> tuple:
    """-> (highest-frequency pair, lowest-frequency pair): what a scaling divides their angle per position by."""
    plain = positions.rope_inv_freq(d_k)
    scaled = positions.rope_inv_freq(d_k, scaling={"type": kind, "factor": factor})
    ratio = plain / scaled  # (d_k/2,)
    return int(round(float(ratio[0]))), int(round(float(ratio[-1])))


def _yarn_score_factor(factor: float, original_max_position: int) -> str:
    a = positions.rope_attention_factor({"type": "yarn", "factor": factor, "original_max_position": original_max_position})
    return f"{a * a:.3f}"  # q and k are each multiplied by a, so every score by a²


def _rolling_keys(window: int, sinks: int, position: int) -> int:
    """The keys a query at ``position`` attends to in a RollingKVCache holding every earlier token."""
    cache = gqa.RollingKVCache(1, 1, 2, window=window, sinks=sinks)
    cache.append(np.zeros((1, 1, position, 2)), np.zeros((1, 1, position, 2)))
    return int(cache.next_mask(1).sum())


def _paged_blocks(block_size: int, tokens: int) -> tuple:
    """-> (blocks one sequence of ``tokens`` takes in a PagedKVCache, slots of them left empty)."""
    pool = long_context.PagedKVCache(n_blocks=tokens // block_size + 2, block_size=block_size, h_kv=1, d_k=1)
    pool.sequence(0).append(np.zeros((1, 1, tokens, 1)), np.zeros((1, 1, tokens, 1)))
    return len(pool.tables[0]), pool.used_slots - pool.filled_slots


def _merged_output(totals, outs) -> str:
    """Chunks whose exp-scores sum to ``totals`` and whose partial outputs are ``outs`` -> the merged output."""
    lses = [np.array([[math.log(t)]]) for t in totals]  # (T=1, 1) each: log of the chunk's denominator
    return f"{float(efficient.merge_attention_partials([np.array([[o]], dtype=float) for o in outs], lses)[0, 0]):.1f}"


def _denoising_finds_the_previous_token_head() -> bool:
    """Key corruption: patching the previous-token head (clean into corrupted) restores > 0.9; value corruption < 0.1."""
    config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    key = circuits.head_patching(params, config, circuits.make_pair(config, np.random.default_rng(1401), 128))
    value = circuits.head_patching(params, config, circuits.make_pair(config, np.random.default_rng(1401), 128,
                                                                      corrupt="value"))
    return bool(key[0, 1] > 0.9 and value[0, 1] < 0.1)


def _resample_is_harshest() -> bool:
    """Over the shipped seeds whose circuit formed: resampling the previous-token head costs more than zeroing or averaging it."""
    r = circuits.load_seed_results()
    ok = circuits.formed(r)  # the seeds whose circuit formed
    return bool(ok.sum() >= 3 and np.all(r["resample_prev"][ok] > np.maximum(r["zero_prev"], r["mean_prev"])[ok]))


def _backup_head_hides() -> bool:
    """Over the shipped seeds whose circuit formed: removing both layer-2 heads costs more than the two removals one at a time."""
    r = circuits.load_seed_results()
    ok = circuits.formed(r)
    return bool(ok.sum() >= 3 and np.all(r["zero_both"][ok] > (r["zero_ind"] + r["zero_backup"])[ok]))


def _attribution_exact_in_the_last_layer() -> bool:
    """Attribution patching equals activation patching for the last layer's heads, and misses for L1 H1."""
    config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    pair = circuits.make_pair(config, np.random.default_rng(1401), 128)
    attr, act = circuits.attribution_patching(params, config, pair), circuits.head_patching(params, config, pair)
    return bool(np.allclose(attr[-1], act[-1], atol=1e-6) and act[0, 1] - attr[0, 1] > 0.1)


def _baseline_shrinks_with_width() -> bool:
    """The random composition baseline at d_model 32 is about twice that at 128 (d_k = D / 2 both): ~1/sqrt(D)."""
    small = circuits.composition_baseline(32, 16, np.random.default_rng(0))
    wide = circuits.composition_baseline(128, 64, np.random.default_rng(0))
    return bool(0 < wide < small and abs(small / wide - 2) < 0.3)


def _masked_row_is_zero() -> bool:
    return bool(np.all(softmax(np.full((1, 4), -np.inf)) == 0))


COMPUTE = {
    "param_count": complexity.param_count,
    "stage_shape": _stage_shape,
    "d_k": lambda d_model, h: heads.split_heads(np.zeros((1, 1, d_model)), h).shape[-1],
    "valid_heads": heads.valid_heads,
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
    "alibi_inverse_slope": lambda h, head: round(1 / float(positions.alibi_slopes(h)[head])),
    "rope_frequency_divisors": _rope_frequency_divisors,
    "yarn_score_factor": _yarn_score_factor,
    "rolling_keys": _rolling_keys,
    "paged_blocks": _paged_blocks,
    "merged_output": _merged_output,
    "quantized_kv_bytes_per_token": lambda layers, h_kv, d_k, bits: int(
        long_context.quantized_kv_bytes_per_token(layers, h_kv, d_k, bits)),
    "denoising_finds_the_previous_token_head": _denoising_finds_the_previous_token_head,
    "resample_is_harshest": _resample_is_harshest,
    "backup_head_hides": _backup_head_hides,
    "attribution_exact_in_the_last_layer": _attribution_exact_in_the_last_layer,
    "baseline_shrinks_with_width": _baseline_shrinks_with_width,
}

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Pow: operator.pow, ast.USub: operator.neg}
_MAX_MAGNITUDE = 10 ** 30  # no number in a quiz is larger; bounds what an expression may compute
_MAX_ITEMS = 16


def _bounded(value, node):
    if isinstance(value, int) and abs(value) > _MAX_MAGNITUDE:
        raise ValueError(f"{ast.unparse(node)!r} exceeds 10**30; quiz expressions compute numbers of at most "
                         "30 digits (a typo in an exponent?)")
    return value


def _arith(node):
    """The value of an arithmetic expression's AST: ints, + - * // ** and tuples only, every
    intermediate value at most 10**30 (so ``9 ** 9 ** 99`` is refused before it is computed)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _bounded(node.value, node)
    if isinstance(node, ast.Tuple) and len(node.elts) <= _MAX_ITEMS:
        return tuple(_arith(e) for e in node.elts)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _arith(node.left), _arith(node.right)
        if not (isinstance(left, int) and isinstance(right, int)):
            raise ValueError(f"{ast.unparse(node)!r}: arithmetic on a tuple; quiz expressions compute ints "
                             "or tuples of ints")
        if isinstance(node.op, ast.Pow) and (right < 0 or right > 128 or (
                abs(left) > 1 and right * math.log2(abs(left)) > 100)):
            raise ValueError(f"{ast.unparse(node)!r} exceeds 10**30; quiz expressions compute numbers of at "
                             "most 30 digits (a typo in an exponent?)")
        if isinstance(node.op, ast.FloorDiv) and right == 0:
            raise ValueError(f"{ast.unparse(node)!r} divides by zero")
        return _bounded(_OPS[type(node.op)](left, right), node)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        value = _arith(node.operand)
        if not isinstance(value, int):
            raise ValueError(f"{ast.unparse(node)!r}: a minus sign on a tuple")
        return _OPS[type(node.op)](value)
    raise ValueError(f"{ast.dump(node)} is not integer arithmetic; quiz expressions use ints, + - * // ** "
                     f"and tuples (of at most {_MAX_ITEMS} items) only")


def choice_value(choice):
    """A computed choice as stored ({"compute": ...} or {"expr": ...}) -> its value (int, tuple, ...).

    A choice that is a string is its own text (``load_questions`` shows it as it is): nothing to compute.

    >>> choice_value({"compute": "param_count", "args": {"d_model": 8}}), choice_value({"expr": "3 * 8 ** 2"})
    (256, 192)
    """
    if not isinstance(choice, dict):
        raise TypeError(f"choice={choice!r:.40} is a {type(choice).__name__}; choice_value computes a choice "
                        "stored as {\"compute\": name, \"args\": {...}} or {\"expr\": \"8 * 4\"} (a string "
                        "choice is its own text)")
    keys = ("expr", "template") if "expr" in choice else ("compute", "args", "template")
    unknown = [k for k in choice if k not in keys]
    if unknown:  # a misspelled "args" would be ignored, and the computation run with its defaults
        raise ValueError(f"choice has the unknown keys {unknown}; a computed choice holds "
                         + ", ".join(repr(k) for k in keys) + ": fix the spelling")
    if "expr" in choice:
        if not isinstance(choice["expr"], str) or len(choice["expr"]) > 200:
            raise ValueError(f"expr={choice['expr']!r} must be a string of at most 200 characters, "
                             "e.g. \"8 * 4 * 512 ** 2\"")
        try:
            tree = ast.parse(choice["expr"], mode="eval")
        except SyntaxError as exc:
            raise ValueError(f"expr={choice['expr']!r} is not a Python expression ({exc.msg})") from None
        return _arith(tree.body)
    name = choice.get("compute")
    if not isinstance(name, str) or name not in COMPUTE:
        raise ValueError(f"choice names the unknown computation {name!r:.40}; known: {', '.join(sorted(COMPUTE))}")
    args = choice.get("args", {})
    if not isinstance(args, dict):
        raise TypeError(f"choice's args={args!r:.40} must be a dict of keyword arguments, e.g. {{\"d_model\": 512}}")
    fn = COMPUTE[name]
    try:
        inspect.signature(fn).bind(**args)
    except TypeError:  # Python's "unexpected keyword argument" names no fix
        params = ", ".join(inspect.signature(fn).parameters)
        raise ValueError(f"choice's args {sorted(args)} do not fit the computation {name!r}, which takes "
                         f"({params}); fix the names") from None
    return fn(**args)


def format_value(value, template: str = "{}") -> str:
    """A value -> its text: ints with thousands separators, tuples as shapes, lists joined.

    ``template`` holds one ``{}`` field, where the text goes (e.g. "h in {}").

    >>> format_value(1048576), format_value((2, 4, 5, 5)), format_value([1, 2, 4], "h in {}")
    ('1,048,576', '(2, 4, 5, 5)', 'h in 1, 2, 4')
    """
    if value is None or not isinstance(value, (str, bool, np.bool_, int, np.integer, tuple, list)):
        raise TypeError(f"value={value!r:.40} ({type(value).__name__}) is no quiz value; format an int, a bool, "
                        "a string, a tuple of ints (a shape) or a list of them")
    _check_template(template)
    if isinstance(value, tuple) and not all(_validate.is_whole(v) for v in value):
        raise TypeError(f"value={value!r:.40} is a tuple but not a shape of whole numbers; give a shape such as "
                        "(2, 4, 5, 5), or a list for other values")
    if isinstance(value, (bool, np.bool_)):
        text = str(bool(value))
    elif isinstance(value, (int, np.integer)):
        text = f"{int(value):,}"
    elif isinstance(value, list):
        text = ", ".join(format_value(v) for v in value)
    else:
        text = str(tuple(int(v) for v in value)) if isinstance(value, tuple) else str(value)
    return template.format(text)


def _check_template(template) -> None:
    """Raise unless ``template`` is a string with exactly one ``{}`` field (a name such as {x} has no value)."""
    if not isinstance(template, str):
        raise TypeError(f"template={template!r:.40} must be a string with one {{}} field, e.g. 'h in {{}}'")
    try:
        fields = [(f, conv) for _, f, _, conv in string.Formatter().parse(template) if f is not None]
    except ValueError as e:  # "Single '}' encountered", an unclosed '{'
        raise ValueError(f"template={template!r:.60} is no format string ({e}); write one {{}} field, e.g. "
                         "'h in {}' ({{ and }} for a literal brace)") from None
    if [f for f, _ in fields] != [""] or fields[0][1] is not None:
        raise ValueError(f"template={template!r:.60} must hold exactly one {{}} field, where the value goes "
                         f"(it has {len(fields)}: {['{' + f + '}' for f, _ in fields]}); write e.g. 'h in {{}}'")


def _choice_text(choice) -> str:
    if isinstance(choice, str):
        return choice
    return format_value(choice_value(choice), choice.get("template", "{}"))


_KEYS = ("id", "notebook", "section", "question", "choices", "answer", "explanation")
MAX_CHOICES = 8  # render_text letters them a..h


def _question(raw, path, n) -> Question:
    """One stored question, checked: every key there, choices valid, the answer an index of them."""
    where = f"{path}: question {n + 1}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where} is a {type(raw).__name__}; each question is an object with the keys "
                         f"{', '.join(_KEYS)}")
    where += f" ({raw['id']!r})" if isinstance(raw.get("id"), str) else ""
    missing = [k for k in _KEYS if k not in raw]
    if missing:
        raise ValueError(f"{where} has no {', '.join(map(repr, missing))}; add "
                         f"{'it' if len(missing) == 1 else 'them'} (each question needs {', '.join(_KEYS)})")
    for key in ("id", "notebook", "section", "question", "explanation"):
        if not isinstance(raw[key], str):
            raise ValueError(f"{where}: {key}={raw[key]!r} must be a string; put it in quotes")
    stored = raw["choices"]
    if not isinstance(stored, list) or not 2 <= len(stored) <= MAX_CHOICES:
        size = f"{len(stored)} choices" if isinstance(stored, list) else f"choices={stored!r}"
        raise ValueError(f"{where} has {size}; give a list of 2 to {MAX_CHOICES} choices")
    choices = []
    for i, c in enumerate(stored):
        if not isinstance(c, (str, dict)):
            raise ValueError(f"{where}: choice {i} is {c!r}; a choice is a string (\"{c}\"), "
                             f"{{\"expr\": \"{c}\"}} or {{\"compute\": ...}}")
        try:
            choices.append(_choice_text(c))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{where}: choice {i} {c!r}: {exc}") from None
    answer = raw["answer"]
    if type(answer) is not int or not 0 <= answer < len(choices):
        raise ValueError(f"{where}: answer={answer!r} is not an index of its {len(choices)} choices; "
                         f"use a whole number 0..{len(choices) - 1} (no quotes)")
    return Question(raw["id"], raw["notebook"], raw["section"], raw["question"], tuple(choices), answer,
                    raw["explanation"], raw.get("verify"))


def load_raw(path=None) -> list[dict]:
    """path (default QUIZ_PATH) -> the questions as stored (dicts, choices not yet computed)."""
    path = Path(QUIZ_PATH if path is None else path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}; "
                         "fix the file there (a missing comma or quote?)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} cannot be read as a quiz file ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise ValueError(f"{path} has no list of questions; a quiz file is {{\"questions\": [...]}}")
    return data["questions"]


def load_questions(path=None) -> list[Question]:
    """path (default QUIZ_PATH) -> [Question]: every choice computed and formatted as text.

    A file with a missing key, an answer that is not an index, invalid JSON, a choice that is a
    bare number or an expression that computes too much raises ValueError naming the file, the
    question and the fix.
    """
    path = Path(QUIZ_PATH if path is None else path)
    questions = [_question(raw, path, n) for n, raw in enumerate(load_raw(path))]
    seen = [q.id for q in questions]
    twice = sorted({i for i in seen if seen.count(i) > 1})
    if twice:
        raise ValueError(f"{path}: the ids {', '.join(map(repr, twice))} are used twice; give each question its own")
    return questions


def _question_arg(question, name: str = "question") -> Question:
    """A Question (as load_questions makes them); a TypeError names ``name`` otherwise."""
    return _validate.instance(question, Question, name, "pass one of load_questions()")


def _questions_arg(questions) -> list[Question]:
    """[Question]: a list of them (load_questions()), each checked."""
    questions = _validate.items(questions, "questions", "load_questions()")
    for i, q in enumerate(questions):
        _question_arg(q, f"questions[{i}]")
    return questions


def verify(question: Question) -> bool:
    """Question -> True when its ``verify`` computation holds (or it has none)."""
    _question_arg(question)
    return True if question.verify is None else bool(choice_value(question.verify))


def choice_index(question: Question, choice) -> int:
    """A chosen index as given (an int, a numpy int, a whole float such as 1.0) -> the int; ValueError else.

    >>> q = Question("q", "04", "4", "?", ("a", "b"), 1, "")
    >>> choice_index(q, 1.0)
    1
    """
    n = len(_question_arg(question).choices)
    whole = isinstance(choice, (int, np.integer, float, np.floating)) and not isinstance(choice, (bool, np.bool_))
    if not whole or not float(choice).is_integer() or not 0 <= choice < n:
        raise ValueError(f"choice={choice!r} is not one of the {n} choices of {question.id!r}; "
                         f"use 0..{n - 1} (a whole number)")
    return int(choice)


def grade(question: Question, choice: int) -> Feedback:
    """Question, chosen index -> Feedback (correct?, a message naming the right answer and why).

    >>> q = Question("q", "04", "4", "Params for h = 8?", ("4·D²", "8·4·D²"), 0, "Same for any h.")
    >>> grade(q, 1)
    Feedback(correct=False, message='Not quite: the answer is "4·D²". Same for any h.')
    """
    if choice_index(question, choice) == question.answer:
        return Feedback(True, f"Right. {question.explanation}")
    return Feedback(False, f'Not quite: the answer is "{question.choices[question.answer]}". {question.explanation}')


def score(questions, answers: dict) -> tuple[int, int]:
    """questions [Question], answers {id: chosen index} -> (correct, answered).

    >>> q = Question("q", "04", "4", "?", ("a", "b"), 1, "")
    >>> score([q], {"q": 1}), score([q], {})
    ((1, 1), (0, 0))
    """
    by_id = {q.id: q for q in _questions_arg(questions)}
    if not isinstance(answers, dict):
        raise TypeError(f"answers must be a dict {{question id: chosen index}}, got {type(answers).__name__} "
                        f"({answers!r:.40}); pass e.g. answers={{{next(iter(by_id), 'q')!r}: 0}}")
    unknown = [i for i in answers if i not in by_id]
    if unknown:
        raise ValueError(f"answers for unknown question ids {', '.join(map(repr, unknown))}; known ids: "
                         f"{', '.join(map(repr, by_id))[:300]}")
    graded = [grade(by_id[i], c).correct for i, c in answers.items()]
    return sum(graded), len(graded)


def render_text(questions) -> str:
    """[Question] -> the quiz as plain text: numbered questions, lettered choices, the answers at the end."""
    lines, key = [], []
    for n, q in enumerate(_questions_arg(questions), 1):
        lines.append(f"{n}. {q.question}  [{q.notebook} §{q.section}]")
        lines += [f"   {'abcdefgh'[i]}) {c}" for i, c in enumerate(q.choices)]
        key.append(f"{n}{'abcdefgh'[q.answer]}")
    return "\n".join(lines + ["", "answers: " + " ".join(key)])


# ----------------------------------------------------------------------------- the interview set of notebook 11
def _markdown_lines(notebook) -> list[str]:
    """notebook (.ipynb path) -> the lines of its markdown cells; a ValueError names a notebook that cannot be read."""
    if not isinstance(notebook, (str, Path)):
        raise TypeError(f"notebook must be the path of a .ipynb file, got {type(notebook).__name__} ({notebook!r:.40})")
    path = Path(notebook)
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [line for c in cells if c.get("cell_type") == "markdown"
                for line in "".join(c["source"]).splitlines()]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"notebook={str(path)!r} cannot be read as a notebook ({type(exc).__name__}); pass the "
                         "path of a course notebook, e.g. notebooks/01_qkv.ipynb") from None


def _anchor(lines: list[str], section) -> str | None:
    """The anchor of the first heading ``## <section>.`` / ``## <section> ·`` among ``lines``, or None."""
    import re

    if not isinstance(section, str) or not re.fullmatch(r"\d+(\.\d+)*", section):
        raise ValueError(f"section={section!r:.40} must be a section number as a string, e.g. section=\"3\"")
    pattern = re.compile(rf"^#{{2,3}}\s+{re.escape(section)}(\.|\s*·)\s")
    for line in lines:
        if pattern.match(line):
            return line.lstrip("#").strip().replace(" ", "-").replace('"', "%22")
    return None


def section_anchor(notebook, section: str) -> str | None:
    """notebook (.ipynb path), section "3" -> the anchor JupyterLab gives its heading ("3.-Q,-K,-V:-..."), or None.

    The heading is the first markdown line ``## <section>.`` / ``## <section> ·`` of that notebook; its
    anchor is its text with spaces as hyphens and double quotes as %22. None: no such heading. A notebook
    that cannot be read, or a section that is not a number such as "3" or "3.2", is a ValueError.
    """
    lines = _markdown_lines(notebook)
    return _anchor(lines, section)


def interview_markdown(questions, notebooks_dir, per_cell: int = 12, here: str = "11_misconceptions_and_interview") -> list[str]:
    """[Question], the notebooks' folder -> the markdown cells of notebook 11's interview set, ``per_cell`` each.

    Each question in bold, its answer (the right choice and the explanation) folded in a <details>, and a
    link to the section that demonstrates it (an anchor where its heading is found). Notebook 11 holds
    exactly these cells; a test renders them again and compares.
    """
    per_cell = _validate.positive_int(per_cell, "per_cell")
    questions = _questions_arg(questions)
    if not isinstance(notebooks_dir, (str, Path)) or not Path(notebooks_dir).is_dir():
        raise ValueError(f"notebooks_dir={notebooks_dir!r:.60} is not a folder; pass the course's notebooks/ folder")
    folder, lines = Path(notebooks_dir), {}
    items = []
    for n, q in enumerate(questions, 1):
        if q.notebook not in lines:  # each notebook read once
            lines[q.notebook] = _markdown_lines(folder / f"{q.notebook}.ipynb")
        anchor = _anchor(lines[q.notebook], q.section)
        label = f"{q.notebook[:2]} §{q.section}" if anchor else q.notebook[:2]
        target = "" if q.notebook == here else f"{q.notebook}.ipynb"
        link = f"[{label}]({target}#{anchor})" if anchor else f"[{label}]({target or '#'})"
        items.append(f"**{n}. {q.question}**\n<details><summary>Answer</summary>\n\n"
                     f"**{q.choices[q.answer]}.** {q.explanation} See {link}.\n</details>")
    return ["\n\n".join(items[i:i + per_cell]) for i in range(0, len(items), per_cell)]
