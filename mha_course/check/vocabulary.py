"""One vocabulary for the whole course: the sentence and the fix of each class of mistake.

The engine names a mistake it derived from the exercise (a transformation of the reference's
output, or a mutant of its code: :mod:`.derive`) with :func:`sentence` and :func:`fix`, so the same
mistake reads the same in every exercise. A checker author may word a catalogued
:class:`~.engine.Mistake` with them too. The slots are filled with the exercise's symbols:
``{output}`` (an output's name), ``{axis}``, ``{a}``, ``{b}`` (axis names: "query (T)"), ``{factor}``
("1/sqrt(d_k)"), ``{op}`` (an operation: "softmax", "sum"), ``{before}``/``{after}`` (what the
reference has, what the learner's numbers need).

>>> sentence("mask-after-softmax")
'the mask is applied after the softmax'
>>> sentence("transpose", output="weights", a="query (T)", b="key (S)")
'weights has its query (T) and key (S) axes swapped'
"""
from __future__ import annotations

__all__ = ["SENTENCES", "TWICE_D", "TWICE_D_K", "RENORMALISED_AFTER", "UNGUARDED_NAN", "UNGUARDED_FIX", "sentence", "fix"]

# a second sentence for a scale of 1/d where 1/sqrt(d) belongs: the same numbers come from scaling twice
TWICE_D_K = ("the scale 1/√d_k applied twice (once by you, once inside a function that already scales, such as "
             "mc.scaled_dot_product_attention): 1/d_k in all")
TWICE_D = TWICE_D_K.replace("d_k", "d")
# a second sentence for NaN on a row with no allowed key: masking after the softmax and renormalising gives it too
RENORMALISED_AFTER = ("the weights masked after the softmax and renormalised (w * mask / sum): the same weights "
                      "wherever a key is allowed, and 0 / 0 = nan on a row with none")
# a second slip said with a derived one: NaN where the reference (and the slip alone) gives a number
UNGUARDED_NAN = ("and NaN where that change alone gives a number: an exp(-inf - (-inf)) or a 0 / 0 left unguarded "
                 "(a row or column with every entry -inf)")
UNGUARDED_FIX = "and guard it as the reference does (a row max of -inf read as 0, a zero total as 1)"

# class -> (sentence, fix); the classes of mutants.CATEGORIES and the output-level transformations
SENTENCES = {
    # what the output shows (a transformation of the expected output)
    "scale": ("every value of {output} is {factor} times the expected one",
              "look for a factor {size} too many, or one missing"),
    "extra-term": ("every value of {output} is {term} more than the expected one ({values}): a term {term} too "
                   "many", "compare each term of your count with the formula: {term} is not part of it"),
    "missing-term": ("every value of {output} is {term} less than the expected one ({values}): a term {term} "
                     "missing", "compare each term of your count with the formula: it has a term {term} too"),
    "negated": ("{output} has the opposite sign", "look for a minus sign too many or missing (a - b for b - a)"),
    "absolute": ("{output} is the absolute value of the expected one (its sign lost where it is negative)",
                 "take abs() only where the formula does (|sum| is not sum, and sum(|x|) is not |sum(x)|)"),
    "squared": ("{output} is the square of the expected value", "look for a square root left out (or a ** 2 too many)"),
    "square-root": ("{output} is the square root of the expected value",
                    "look for a square root too many (or a ** 2 left out)"),
    "exponential": ("{output} is exp of the expected value (the log-space value was expected)",
                    "return the value in the form the exercise states: leave out the exp"),
    "logarithm": ("{output} is the log of the expected value (exp left out)",
                  "return the value in the form the exercise states: apply the exp"),
    "input-returned": ("{output} is the argument {arg}, unchanged (the step that computes {output} is not applied)",
                       "compute {output} from {arg} as the formula does"),
    "inverse": ("{output} is 1 / the expected value", "a division the wrong way round: a / b, not b / a"),
    "transpose": ("{output} has its {a} and {b} axes swapped", "a transpose too many or too few (or an axis "
                  "chosen by its length, which takes the other one where the two lengths are equal)"),
    "reshaped-layout": ("{output} holds the right numbers in the wrong places: the expected array read in the axis "
                        "order {order} and reshaped to its shape (a transpose to another axis order before a "
                        "reshape, or a reshape where a transpose belongs)",
                        "before a reshape, transpose to the layout whose neighbouring axes it merges or splits; a "
                        "reshape never moves an axis"),
    "axis-order": ("{output} holds the right values with its axes in the order {order}",
                   "a transpose or a reshape too many or too few"),
    "flipped": ("{output} is in reverse order along its {axis} axis", "a reversal ([::-1], np.flip) too many or "
                "too few"),
    "shifted": ("{output} is shifted by one along its {axis} axis", "an off-by-one in a position or an index"),
    "reversed-input": ("the expected result for {arg} with its {axis} axis reversed",
                       "check the order along the {axis} axis (a [::-1] or a reversed() too many or too few)"),
    "swapped-inputs": ("{a} and {b} swapped (each used where the other belongs)",
                       "check which input each step reads: {a} where the formula has {a}, {b} where it has {b}"),
    "flipped-mask": ("{output} is in reverse order along its {axis} axis: its True entries are at the other end "
                     "(the padding at the front, say, where it belongs at the end)",
                     "build it from the start of the axis: np.arange(S) < length keeps the first length entries"),
    "repeated": ("{output} has {how} along its {axis} axis (twice the expected length)",
                 "one entry per pair: step by 2 (np.arange(0, d, 2)) or take half the length"),
    "non-finite": ("{output} has nan or inf where the expected values are finite: a 0 / 0 or a division by 0 (a "
                   "sum or a count that is 0, a row that sees no key, an int() of a fraction) or an overflow (exp of "
                   "a large number, a fixed-width integer)",
                   "find the step that divides by 0 or overflows: in a softmax, subtract the row's maximum before "
                   "exp and give a row with no key (a sum of 0) the value 0; elsewhere keep the divisor as given"),
    "additive-mask": ("an additive mask (0 where the expected mask is True, -inf where it is False) where a "
                      "boolean mask is expected",
                      "return the boolean mask (True = may attend); the additive form is np.where(mask, 0.0, -np.inf)"),
    "additive-mask-reversed": ("an additive mask (0 and -inf) where a boolean mask is expected, with -inf where "
                               "the expected mask is True (the polarity reversed too)",
                               "return the boolean mask, True where the expected mask is True"),
    "off-by-one": ("{output} is {delta} than expected on every case (an off-by-one)",
                   "look for a + 1 or - 1 too many, or < where <= belongs"),
    "overflow": ("{output} wrapped round a {bits}-bit integer: these are the expected numbers modulo 2^{bits} (an "
                 "np.int{bits} on the way overflows)", "count with Python ints (or np.int64): no dtype=np.int{bits}"),
    "truncated": ("{output} is the expected value {how}: the fraction is lost",
                  "keep the real number: no int(), //, round() or ceil on the way"),
    "float-result": ("{output} is a float where a whole number (int) is expected", "{how}, and return an int"),
    "swapped-outputs": ("{a} and {b} swapped (each returned in the other's place)",
                        "return {a} first, then {b}, as the exercise states"),
    "output-for-output": ("{b}: the expected {a} (the step or the weights of {a} used for {b} too)",
                          "compute each of {b} with its own weights and its own formula"),
    "replaced-input": ("{used} used where {arg} belongs (these are the expected numbers for {arg} = {used})",
                       "check which input each step reads: {arg} where the formula has {arg}"),
    "max-normaliser": ("{output}: each line over the {axis} is divided by its largest value instead of its sum (or "
                       "not divided at all: exp(x - max) already has largest value 1): it does not sum to 1",
                       "divide the exponentials by their sum over the {axis}: e / e.sum(axis, keepdims=True)"),
    "wrong-normaliser": ("{output}: each line over the {axis} is right up to a factor of its own: the exponentials "
                         "are right, but they are divided by something other than their sum, so a line does not "
                         "sum to 1",
                         "divide the exponentials by their sum over the {axis}: e / e.sum(axis, keepdims=True)"),
    "restricted-keys": ("{output}: a mask the exercise does not have takes away {which}: your weights are the expected "
                        "ones over the keys that are left, renormalised",
                        "let each query attend every key the exercise allows, and no fewer"),
    "negated-input": ("the sign of {arg} flipped: these are the expected numbers for its negative (subtracted "
                      "where it is added, or a minus sign too many)", "check the sign of {arg} in the formula"),
    "batch-merged": ("the batch items merged into one sequence ({args} flattened with .reshape(-1, d)): every query "
                     "also reads the other items' keys", "keep the batch axes: work on (..., T, d) arrays "
                     "(np.swapaxes(K, -1, -2), @ on the last two axes), never flatten them together"),
    "reshaped-input": ("{arg} reshaped where it belongs transposed ({code} for an (m, n) matrix): a reshape keeps "
                       "the entries in their order, a transpose moves them", "use .T (or np.swapaxes(x, -1, -2)) to "
                       "transpose; a reshape only regroups the same sequence of numbers"),
    "transposed-input": ("{arg} used transposed (its rows read as its columns)",
                         "use {arg} as it is: x @ W reads W's columns, W.T its rows"),
    "flag-inverted": ("the flag {arg} read the other way round (the numbers of {arg}={other})",
                      "use {arg} as given: the part it switches on belongs only where {arg} is True"),
    "flag-ignored": ("the flag {arg} ignored: the numbers of {arg}={value} every time",
                     "use {arg}: the result must change with it"),
    "bias-dropped": ("{which} never added (the expected numbers with no such bias)",
                     "add each bias after its matrix product, when it is given: x @ W_q + b_q"),
    "projection-dropped": ("the projection by {which} left out (with its bias {bias}): these are the expected numbers "
                           "with {which} the identity", "apply it: ... @ {which} (+ {bias} when given)"),
    "projection-dropped-bias-kept": ("the projection by {which} left out, its bias {bias} still added: these are the "
                                     "expected numbers with {which} the identity", "apply it: ... @ {which} + {bias}"),
    "last-left-out": ("the last entry of {arg} along axis {axis} left out (as if it were 0): a loop or sum over that "
                      "axis that stops one early", "run over every index: range(n), not range(n - 1)"),
    "first-left-out": ("the first entry of {arg} along axis {axis} left out (as if it were 0): a loop or sum over "
                       "that axis that starts one late", "start at index 0: range(n), not range(1, n)"),
    "input-ones": ("{arg} ignored: these are the expected numbers for {arg} of all ones (is {arg} multiplied in?)",
                   "use {arg}: every entry of the result depends on it"),
    "first-item": ("{arg}[0] used for every item of the batch: these are the expected numbers when every item "
                   "has the first one's {arg}", "use each item's own row: {arg}[b] for item b (index the batch axis "
                   "with the item, or keep the axis and broadcast)"),
    "input-added": ("{arg} added to the result: these are the expected numbers plus {arg} (a residual connection "
                    "the exercise does not have)", "return the formula's result alone; a residual x + ... belongs to "
                    "the block around it"),
    "scaled-input": ("{args} multiplied by {factor} before use: these are the expected numbers for {args} × {factor}",
                     "use {args} as given: the formula scales where it says, once"),
    "size-from-array": ("{arg} ignored: {source} used in its place (a size read from an array where the argument "
                        "{arg} is given)", "use the argument {arg} itself: {source} is another size"),
    "argument-ignored": ("{arg} ignored: these are the expected numbers for {arg} = {value} on every case (a value "
                         "written into the code?)", "use the argument {arg}: the result must change with it"),
    "argument-changed": ("{arg} {change} used where {arg} belongs (these are the expected numbers for {arg} {change})",
                         "check each use of {arg} (an index counts from 0; a size is not its half or its double)"),
    "unstacked": ("a list of {n} arrays where one array is expected", "stack them into one array: np.stack(parts, "
                  "axis=...) (one per head: axis=1) or np.concatenate"),
    # what the code does (a mutant of the reference)
    "operator": ("{after} where {before} belongs", "check each arithmetic operator against the formula"),
    "comparison": ("the comparison {after} where {before} belongs (an off-by-one at the boundary)",
                   "check < against <= at the boundary"),
    "comparison-negated": ("the opposite test: {after} where {before} belongs", "test what the formula tests "
                           "(== for the same, != for different)"),
    "comparison-boundary": ("the boundary moved by one: {after} where {before} belongs",
                            "check the boundary: which index is the last one included"),
    "constant": ("the number {after} where {before} belongs", "use {before}, as in the formula"),
    "axis": ("the {op} over axis {after} where axis {before} belongs", "take the {op} over axis {before}"),
    "axis-fixed": ("the {op} over axis {to} where the axis passed in ({fixed}) belongs",
                   "take the {op} over {fixed}, the axis the function is given"),
    "keepdims": ("keepdims switched in the {op}", "keepdims=True keeps the reduced axis for broadcasting"),
    "slice-bound": ("a slice bound off by one", "check where each slice starts and stops (the stop is excluded)"),
    "index": ("an index off by one", "check each index against the formula (positions count from 0)"),
    "parts-order": ("{after} where {before} belongs (the parts joined in another order)",
                    "join the parts in the formula's order: {before}"),
    "range-shifted": ("{after} where {before} belongs (the range shifted by one)",
                      "check where the range starts and stops: np.arange(1, n + 1) is 1..n, np.arange(n) is 0..n-1"),
    "dropped-term": ("a term left out: {after} where {before} belongs", "compare each step with the formula in the "
                     "notebook"),
    "doubled-term": ("{after} where {before} belongs (a term counted twice)", "count each term once: {before}"),
    "swapped-arguments": ("{after} where {before} belongs (two arguments swapped)", "use {before}"),
    "reduction": ("{after} where {before} belongs", "use {before}, as in the formula"),
    "reciprocal": ("a division the wrong way round (b / a for a / b)", "divide as the formula does"),
    "negation": ("a minus sign (or a not) added or lost", "check each sign against the formula"),
    "dropped-call": ("the {op} left out", "apply the {op}, as in the formula"),
    "sqrt": ("{after} where {before} belongs ({how})", "use {before}, as in the formula"),
    "transpose-call": ("a transpose left out", "transpose where the formula does (np.swapaxes(K, -1, -2))"),
    "reversed": ("a reversal left out (the order is reversed)", "reverse where the formula does"),
    "rounding": ("another rounding ({after} where {before} belongs)", "round as the formula does"),
    "floor-division": ("floor division where true division belongs (or the reverse)",
                       "// rounds down: use / for a real number, // for a count or an index"),
    "mask-polarity": ("the mask's polarity is reversed", "True means may attend: keep the scores where the mask is "
                      "True, -inf elsewhere"),
    "statement-order": ("two steps in the other order", "do the steps in the formula's order"),
    "mask-after-softmax": ("the mask is applied after the softmax",
                           "mask the scores (-inf) before the softmax, so each row still sums to 1"),
    "subscript": ("{after} where {before} belongs ({how})",
                  "index the axis the formula names: x[:, i] takes item i of axis 1 for every item of axis 0"),
    "replaced-name": ("{after} where {before} belongs ({to} read in place of {from})",
                      "check which input each step reads: {from} here"),
    "finite-infinity": ("a large finite number where -inf belongs (a -1e9 or -1e4 mask): a row whose every entry "
                        "is masked gets weights that sum to 1 instead of zeros",
                        "mask with -np.inf, and give a row with no allowed entry zero weights"),
    "axes-reordered": ("{after} where {before} belongs (two axes in each other's place)",
                       "order the axes as the formula does: {before}"),
    "shape-axis": ("{after} where {before} belongs (a size read from another axis)",
                   "read each size from its own axis: {before}"),
    "other-function": ("np.{after} where np.{before} belongs", "use np.{before}, as in the formula"),
    "regrouped": ("{after} where {before} belongs (the brackets in another place: operator precedence)",
                  "bracket as the formula does: {before}"),
    "open-slice": ("{after} where {before} belongs (a slice where one index belongs)", "take the one index: {before}"),
    "numbers-swapped": ("the numbers {a} and {b} in each other's place", "put each number where the formula has it"),
    "pseudo-inverse": ("the pseudo-inverse where the transpose belongs: np.linalg.pinv where {from} belongs",
                       "use the transpose {from}: a gradient goes back through a product by the transpose of the "
                       "other factor, it does not undo the product"),
    "unpack-order": ("the shape unpacked as {to} where it is {from} (the axes read in another order)",
                     "unpack in the order of the array's layout: {from}"),
    "negative-stop": ("a stop of {to} where {from} belongs: the same unless it is 0, where [:-0] is empty",
                      "write the stop as {from}"),
    "inside-out": ("{after} where {before} belongs (the function and the sum, mean or max in the other order)",
                   "apply them in the formula's order: {before}"),
    "size-shifted": ("{to} where {from} belongs (a size off by one inside the formula)",
                     "use {from}, as in the formula: the size itself, not one more or one less"),
    "floored-terms": ("{after} where {before} belongs: each term rounded down on its own, not the sum",
                      "round down once, after adding: {before}"),
    "first-occurrence": ("only the first occurrence counted, not every one", "count every occurrence"),
    "last-occurrence": ("only the last occurrence counted, not every one", "count every occurrence"),
}
_ALIASES = {"transpose": "transpose-call"}  # a mutant category whose name an output-level class already uses


# the sentence of a class whose slots are not known (a long piece of code, a permutation's swap)
_PLAIN = {
    "operator": "an arithmetic operator swapped (+ for -, * for /, or the reverse)",
    "comparison": "a comparison off at the boundary (< for <=, or the reverse)",
    "constant": "a number changed",
    "axis": "an operation over another axis",
    "axis-fixed": "an operation over a fixed axis where the axis passed in belongs",
    "swapped-arguments": "two arguments (or operands) swapped",
    "reduction": "another reduction (sum, mean, max or min)",
    "rounding": "another rounding (floor, ceil or round)",
    "dropped-call": "a step of the formula left out",
    "keepdims": "keepdims switched in a reduction",
    "dropped-term": "a term or a step left out",
    "doubled-term": "a term counted twice",
    "comparison-negated": "the opposite test (== for !=, or the reverse)",
    "comparison-boundary": "a comparison's boundary moved by one",
    "replaced-name": "one argument read where another belongs",
    "subscript": "an index on another axis",
    "range-shifted": "a range shifted by one",
    "parts-order": "the parts joined in another order",
    "sqrt": "a square root left out, or one too many",
    "floored-terms": "each term rounded down on its own, not the sum",
    "other-function": "another numpy function for one",
    "shape-axis": "a size read from another axis",
    "axes-reordered": "two axes in each other's place",
    "regrouped": "the brackets of two operations in another place",
    "numbers-swapped": "two numbers in each other's place",
    "open-slice": "a slice where one index belongs",
    "size-shifted": "a size off by one inside a formula",
    "pseudo-inverse": "the pseudo-inverse where the transpose belongs",
    "inside-out": "a function and a reduction in the other order",
    "extra-term": "a term too many in a count",
    "reshaped-layout": "a reshape where a transpose belongs",
    "reshaped-input": "a matrix reshaped where it belongs transposed",
    "batch-merged": "the batch items merged into one sequence",
    "missing-term": "a term missing from a count",
    "unpack-order": "a shape unpacked in another order",
    "negative-stop": "a slice stop -k where n - k belongs",
    "flag-inverted": "a flag (a True/False argument) read the other way round",
    "flag-ignored": "a flag (a True/False argument) ignored",
    "argument-ignored": "a number argument ignored (one value used on every case)",
    "size-from-array": "a size read from an array where an argument gives it",
    "bias-dropped": "a bias never added",
    "truncated": "a real number made a whole number",
    "overflow": "a count that overflowed a fixed-width integer",
    "scaled-input": "an input scaled before use",
    "input-added": "an input added to the result",
    "first-item": "the first item's input used for the whole batch",
    "input-ones": "an input ignored (as if all ones)",
    "last-left-out": "a loop that stops one early (the last entry left out)",
    "first-left-out": "a loop that starts one late (the first entry left out)",
    "projection-dropped": "a projection (a weight matrix) left out",
    "projection-dropped-bias-kept": "a projection (a weight matrix) left out, its bias still added",
}


def _filled(template, slots, plain="") -> str:
    try:
        return template.format(**{k: v for k, v in slots.items() if v not in ("", None)})
    except (KeyError, IndexError, ValueError):
        return plain or template


def sentence(key: str, **slots) -> str:
    """The course's sentence for the mistake class ``key``, with its slots filled.

    Raises ValueError for an unknown class (naming the known ones).
    """
    if key not in SENTENCES:
        raise ValueError(f"unknown mistake class {key!r}; known: {', '.join(SENTENCES)}")
    return _filled(SENTENCES[key][0], slots, _PLAIN.get(key, ""))


def fix(key: str, **slots) -> str:
    """The course's fix for the mistake class ``key``, with its slots filled.

    >>> fix("mask-after-softmax")
    'mask the scores (-inf) before the softmax, so each row still sums to 1'
    """
    if key not in SENTENCES:
        raise ValueError(f"unknown mistake class {key!r}; known: {', '.join(SENTENCES)}")
    return _filled(SENTENCES[key][1], slots, "compare each step with the formula in the notebook")


def mutant_class(category: str) -> str:
    """The vocabulary class of a mutant category (mutants.CATEGORIES), '' when it has none."""
    key = _ALIASES.get(category, category)
    return key if key in SENTENCES and key not in _OUTPUT_CLASSES else ""


_OUTPUT_CLASSES = frozenset({"scale", "extra-term", "missing-term", "reshaped-layout", "negated", "inverse", "absolute", "input-returned", "squared", "square-root", "exponential",
                             "logarithm", "transpose", "axis-order", "flipped", "shifted", "unstacked",
                             "reversed-input", "swapped-inputs", "flipped-mask", "repeated", "non-finite",
                             "additive-mask", "additive-mask-reversed", "off-by-one", "float-result", "truncated", "overflow", "swapped-outputs", "output-for-output",
                             "replaced-input", "transposed-input", "negated-input", "argument-changed",
                             "max-normaliser", "wrong-normaliser", "restricted-keys",
                             "flag-inverted", "flag-ignored", "argument-ignored", "size-from-array", "reshaped-input", "batch-merged",
                             "bias-dropped", "projection-dropped", "projection-dropped-bias-kept", "scaled-input",
                             "input-added", "first-item", "last-left-out", "first-left-out",
                             "input-ones"})
