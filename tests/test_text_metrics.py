"""BLEU / ROUGE: reference vectors, tokenization, and agreement with the
reference libraries (NLTK ``sentence_bleu``, ``rouge_chinese``) on generated pairs."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
import warnings
from collections.abc import Callable

import pytest

from groundscope.scoring import english as E
from groundscope.scoring import tokenize as T
from groundscope.scoring.text import (
    BLEU_KEYS,
    ROUGE_KEYS,
    best_over_references,
    bleu,
    bleu_tokens,
    lcs_length,
    rouge,
    rouge_tokens,
)

TINY = 1e-300  # NLTK's "no n-gram match" value is BP * sys.float_info.min

# pred, ref, BLEU-1..3 (BLEU-4 is ~0 in every row), ROUGE-1 r/p/f, ROUGE-L r/p/f
REFERENCE_VECTORS = [
    (
        "the cat sat on the mat",
        "the cat is on the mat",
        (0.833333, 0.6, 0.25),
        (0.8, 0.8, 0.8),
        (0.833333, 0.833333, 0.833333),
    ),
    (
        "A dog is running in the park",
        "A dog runs in the park",
        (0.714286, 0.5, 0.2),
        (0.833333, 0.714286, 0.769231),
        (0.833333, 0.714286, 0.769231),
    ),
    ("我爱北京天安门", "我爱北京", (0.75, 0.666667, 0.5), (1.0, 0.75, 0.857143), (1.0, 0.75, 0.857143)),
]


@pytest.mark.parametrize(("pred", "ref", "bleus", "rouge1", "rougel"), REFERENCE_VECTORS)
def test_reference_vectors(
    pred: str,
    ref: str,
    bleus: tuple[float, ...],
    rouge1: tuple[float, ...],
    rougel: tuple[float, ...],
) -> None:
    b = bleu(pred, ref)
    assert [b[k] for k in BLEU_KEYS[:3]] == pytest.approx(bleus, abs=1e-6)
    assert 0.0 < b["bleu-4"] < TINY
    r = rouge(pred, ref)
    assert [r[f"rouge-1-{s}"] for s in "rpf"] == pytest.approx(rouge1, abs=1e-6)
    assert [r[f"rouge-l-{s}"] for s in "rpf"] == pytest.approx(rougel, abs=1e-6)


def test_case_sensitive_row() -> None:
    assert bleu("dog", "Dog") == dict.fromkeys(BLEU_KEYS, 0.0)
    assert rouge("dog", "Dog") == dict.fromkeys(ROUGE_KEYS, 0.0)


def test_output_keys_and_types() -> None:
    assert tuple(bleu("a b", "a b")) == BLEU_KEYS
    assert tuple(rouge("a b", "a b")) == ROUGE_KEYS
    assert ROUGE_KEYS[:3] == ("rouge-1-r", "rouge-1-p", "rouge-1-f")
    assert all(isinstance(v, float) for v in {**bleu("", "x"), **rouge("", "x")}.values())


@pytest.mark.parametrize(("pred", "ref"), [("", "the cat"), ("   \n ", "the cat"), ("the cat", ""), ("", "")])
def test_empty_side_scores_zero(pred: str, ref: str) -> None:
    assert rouge(pred, ref) == dict.fromkeys(ROUGE_KEYS, 0.0)
    assert bleu(pred, ref) == dict.fromkeys(BLEU_KEYS, 0.0)


def test_bleu_edge_cases() -> None:
    short = bleu("the cat", "the cat sat")  # shorter than the reference, than n=3
    assert short["bleu-1"] == pytest.approx(0.6065306597, abs=1e-9)  # exp(1 - 3/2)
    assert 0.0 < short["bleu-3"] < TINY
    assert bleu("the the the the", "the cat")["bleu-1"] == pytest.approx(0.25)  # clipped


ENGLISH_CASES = [
    ("The dog runs. It is fast!", ["The", "dog", "runs", ".", "It", "is", "fast", "!"]),
    ('She said, "Hello there."', ["She", "said", ",", "``", "Hello", "there", ".", "''"]),
    ("I don't know.", ["I", "do", "n't", "know", "."]),
    ("They'll win, won't they?", ["They", "'ll", "win", ",", "wo", "n't", "they", "?"]),
    ("Pi is 3.14 and e is 2.71.", ["Pi", "is", "3.14", "and", "e", "is", "2.71", "."]),
    ("Mr. Smith went home.", ["Mr.", "Smith", "went", "home", "."]),
    ("The U.S. is big.", ["The", "U.S.", "is", "big", "."]),
    ("e.g. apples, i.e. fruit.", ["e.g.", "apples", ",", "i.e.", "fruit", "."]),
    ("It's 5 p.m. We leave.", ["It", "'s", "5", "p.m", ".", "We", "leave", "."]),
    ("1,000 people came (roughly).", ["1,000", "people", "came", "(", "roughly", ")", "."]),
    ("I cannot go; I'm gonna stay.", ["I", "can", "not", "go", ";", "I", "'m", "gon", "na", "stay", "."]),
    ("Wait... what?", ["Wait", "...", "what", "?"]),
    ("“Smart quotes” work.", ["“", "Smart", "quotes", "”", "work", "."]),
    ("He left.Then he came", ["He", "left.Then", "he", "came"]),
    (
        "Good muffins cost $3.88 in New York. Please buy me two of them. Thanks.",
        [
            "Good",
            "muffins",
            "cost",
            "$",
            "3.88",
            "in",
            "New",
            "York",
            ".",
            "Please",
            "buy",
            "me",
            "two",
            "of",
            "them",
            ".",
            "Thanks",
            ".",
        ],
    ),
    ("Hello world.  ", ["Hello", "world", "."]),
    ("", []),
]


@pytest.mark.parametrize(("text", "tokens"), ENGLISH_CASES)
def test_english_bleu_tokens(text: str, tokens: list[str]) -> None:
    assert bleu_tokens(text) == tokens


def test_chinese_and_rouge_tokens() -> None:
    assert bleu_tokens("我爱 北京") == ["我", "爱", " ", "北京"]  # jieba keeps the space
    assert rouge_tokens("我爱 北京") == ["我", "爱", "北京"]
    assert rouge_tokens("The cat, it sat.") == ["The", "cat,", "it", "sat."]
    assert rouge_tokens("What?No") == ["What?", "No"]  # rouge_chinese's sentence cut
    assert rouge_tokens(" \n x") == ["", "x"]  # a blank line becomes an empty token
    assert rouge_tokens("wait......x") == ["wait......", "x"]
    assert rouge_tokens("wait……x") == ["wait……", "x"]
    assert rouge_tokens("a?”b") == ["a?”", "b"]
    assert rouge_tokens("他说“好！”然后") == ["他", "说", "“", "好", "！", "”", "然后"]


# ---------------------------------------------------------------- generated pairs

_EN_TEXT = (
    "the a cat dog sat on mat is running in park The A Dog It He She they I we . , ! ? ; : "
    "... -- ( ) [ ] { } < > $ 5 50% & @ # * 3.14 1,000 2.71. don't can't won't I'm it's "
    "they'll we've you're she'd cannot CANNOT gonna Gotta wanna lemme gimme d'ye more'n 'tis "
    "'Twas Mr. Dr. Mrs. U.S. e.g. i.e. etc. vs. J. No. p.m. Inc. \" '' `` ' “ ” ‘ ’ « » — – "
    "café naïve O'Neil rock'n'roll Smith's James' dogs' x.y end. Really?! Yes!! ok.)"
    " 'tiſ İs GONNA Bach."
)
_EN_WORDS = _EN_TEXT.split()
_ZH_TEXT = (
    "我 爱 北京 天安门 今天 天气 很 好 的 是 一个 猫 狗 在 公园 里 跑 。 ， ！ ？ “ ” ： 、 "
    "…… 他 说 你好 然后 走 了 图片 中 有 两只 hello 3.14 A ? ! . cat"
)
_ZH_WORDS = _ZH_TEXT.split()
_SEPARATORS = (" ", " ", " ", " ", "", "  ", "\n", "\t", " \n ")


def _sentence(rng: random.Random, words: list[str], joiner: str) -> str:
    n = rng.choice((0, 1, 1, 2, 3, 5, 8, 12, 20))
    parts = [rng.choice(words) for _ in range(n)]
    if joiner:
        return "".join(p + rng.choice(_SEPARATORS) for p in parts).strip(" ")
    return "".join(parts)


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    fixed = ["", " ", "\n", "a", "the the the the", "。", "?", "...", "......x", "A. B. C."]
    out = list(fixed)
    while len(out) < count:
        kind = rng.random()
        if kind < 0.55:
            out.append(_sentence(rng, _EN_WORDS, " "))
        elif kind < 0.8:
            out.append(_sentence(rng, _ZH_WORDS, ""))
        else:
            out.append(_sentence(rng, _ZH_WORDS + _EN_WORDS, " "))
    return out


def _pairs(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed + 1)
    texts = _texts(seed, count)
    pairs = []
    for text in texts:
        other = rng.choice(texts)
        if rng.random() < 0.5 and text:  # related pair: a perturbed copy
            words = text.split(" ")
            rng.shuffle(words[: rng.randint(0, len(words))])
            other = " ".join(w for w in words if rng.random() < 0.8)
        pairs.append((text, other))
    return pairs


@pytest.fixture(scope="module")
def oracle_tokenizers() -> tuple[Callable[[str], list[str]], Callable[[str], list[str]]]:
    import jieba
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    punkt, words = PunktSentenceTokenizer(T.punkt_parameters()), NLTKWordTokenizer()

    def word_tokenize(text: str) -> list[str]:
        return [w for sentence in punkt.tokenize(text) for w in words.tokenize(sentence)]

    def bleu_oracle_tokens(text: str) -> list[str]:
        return list(jieba.cut(text)) if T.contains_chinese(text) else word_tokenize(text)

    return word_tokenize, bleu_oracle_tokens


def test_english_tokenizer_matches_nltk(oracle_tokenizers: tuple) -> None:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    word_tokenize, _ = oracle_tokenizers
    english, punkt = E.english(), PunktSentenceTokenizer(T.punkt_parameters())
    for text in _texts(7, 2500):
        assert english.tokenize(text) == word_tokenize(text), repr(text)
        assert english.sentences(text) == punkt.tokenize(text), repr(text)


def test_bleu_matches_nltk_sentence_bleu(oracle_tokenizers: tuple) -> None:
    from nltk.translate.bleu_score import sentence_bleu

    _, tokens = oracle_tokenizers
    weights = [(1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pred, ref in _pairs(11, 1500):
            ours = bleu(pred, ref)
            hyp, refs = tokens(pred), [tokens(ref)]
            expected = [sentence_bleu(refs, hyp, weights=w) for w in weights]
            assert [ours[k] for k in BLEU_KEYS] == pytest.approx(expected, abs=1e-9, rel=0), (pred, ref)


def _rouge_oracle(pred: str, ref: str) -> dict[str, float]:
    import jieba
    from rouge_chinese import Rouge

    def prepare(text: str) -> str:
        return " ".join(jieba.cut(text)) if T.contains_chinese(text) else text

    try:
        scores = Rouge().get_scores(prepare(pred), prepare(ref), ignore_empty=True)[0]
    except ValueError:  # empty or blank side: rouge_chinese raises, we score 0
        return dict.fromkeys(ROUGE_KEYS, 0.0)
    return {f"rouge-{n}-{s}": scores[f"rouge-{n}"][s] for n in "12l" for s in "rpf"}


def test_rouge_matches_rouge_chinese() -> None:
    for pred, ref in _pairs(23, 1500):
        ours, expected = rouge(pred, ref), _rouge_oracle(pred, ref)
        assert list(ours) == list(ROUGE_KEYS)
        for key in ROUGE_KEYS:
            assert ours[key] == pytest.approx(expected[key], abs=1e-9, rel=0), (pred, ref, key)


def test_rouge_tokens_match_rouge_chinese_counts() -> None:
    from rouge_chinese import Rouge

    raw = Rouge(raw_results=True)
    for text in _texts(31, 2500):
        tokens = rouge_tokens(text)
        if not tokens:
            assert not text.strip()
            continue
        prepared = " ".join(jieba_cut(text)) if T.contains_chinese(text) else text
        counts = raw.get_scores(prepared, prepared)[0]
        assert counts["rouge-l"]["hyp"] == len(tokens), repr(text)
        assert counts["rouge-1"]["hyp"] == len(set(tokens)), repr(text)
        assert counts["rouge-2"]["hyp"] == len(set(itertools.pairwise(tokens))), repr(text)


def jieba_cut(text: str) -> list[str]:
    import jieba

    return list(jieba.cut(text))


def _lcs_dp(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev_diag, row[0] = 0, 0
        for j, y in enumerate(b, start=1):
            prev_diag, row[j] = row[j], prev_diag + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def test_lcs_length_matches_dynamic_programming() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 90))]
        b = [rng.choice("abcdef") for _ in range(rng.randint(0, 70))]
        assert lcs_length(a, b) == _lcs_dp(a, b) == lcs_length(b, a)


def test_best_over_references_takes_max_per_key() -> None:
    refs = ["the cat is on the mat", "a cat sat on a mat"]
    best = best_over_references(rouge, "the cat sat on the mat", refs)
    each = [rouge("the cat sat on the mat", r) for r in refs]
    assert best == {k: max(e[k] for e in each) for k in ROUGE_KEYS}
    assert best_over_references(bleu, "x", ["x"]) == bleu("x", "x")
    with pytest.raises(ValueError):
        best_over_references(bleu, "x", [])


def test_import_is_lazy() -> None:
    code = (
        "import sys, groundscope.scoring.text as t; "
        "assert 'nltk' not in sys.modules and 'jieba' not in sys.modules; "
        "t.rouge('a b', 'a c'); assert not {'nltk', 'jieba'} & set(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- shortcuts vs NLTK
# The English tokenizer's shortcuts (see groundscope.scoring.tokenize) against NLTK's own
# objects, on inputs aimed at each: Punkt contexts decided without annotation, the final
# mark split, the gated / str.replace word steps, the whitespace-run skip, and the
# contraction literals (with case-folding traps: ſ, K, İ).

_ATOMS = [
    "a", "x", "Ab", "dog", "The", "3", "14", "Mr", "U", "S", "J", "No", ".", ".", "?", "!", ",", ":",
    ";", "'", "'", '"', "`", "``", "''", "(", ")", "[", "]", "{", "}", "<", ">", "-", "--", "—", "–",
    "*", "&", "@", "#", "$", "%", "…", "...", "..", "«", "»", "“", "”", "‘", "’", "„", " ", " ", " ",
    "  ", "\n", "\t", "\u00a0", "\u2009", "\x1c", "\u3000", "cannot", "CanNot", "gonna", "wanna",
    "gimme", "lemme", "gotta", "d'ye", "more'n", "'tis", "'Twas", "'tiſ", "ſ", "K", "İ", "n't",
    "N'T", "'s", "'S", "'m", "'d", "'ll", "'re", "'ve", "'LL", "don't", "it's", "é", "_", "/",
    "1,000", "3.14", "e.g.", "U.S.", "p.m.", "Inc.", "Dr.", "J.", "A.", "5.", "x.y",
]
_WORDS = [
    "the", "cat", "dog", "sat", "on", "is", "running", "The", "It", "He", "I", "A", "Mr.", "Dr.",
    "U.S.", "e.g.", "etc.", "3.14", "1,000", "don't", "it's", "they'll", "cannot", "gonna",
    "(left)", '"red"', "--", "J.", "5", "No.", "Inc.", "café", "O'Neil", "dogs'", "'tis", "x.y",
]
_ENDINGS = ["", "", "", ".", ",", "!", "?", ":", ";", ".)", '."', ".'", "!!", "?!", "...", ".”", "’", ")"]
_GAPS = [" ", " ", " ", "  ", "\n", "\t", " \n ", ""]


def _atom_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ATOMS) for _ in range(rng.randint(0, 14))) for _ in range(count)]


def _word_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        words = [rng.choice(_WORDS) + rng.choice(_ENDINGS) + rng.choice(_GAPS)
                 for _ in range(rng.randint(1, 14))]
        texts.append("".join(words).strip(" ") if rng.random() < 0.5 else "".join(words))
    return texts


@pytest.fixture(scope="module")
def nltk_english() -> tuple:
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer(T.punkt_parameters()), NLTKWordTokenizer()


def test_word_steps_match_nltk_word_tokenizer(nltk_english: tuple) -> None:
    _, nltk_words = nltk_english
    english = E.english()
    targeted = [
        "He won't go.", "x 't.", "cannot.", "wanna?", "Pi is 3.14.", "a.", "A!", "wait..", "end. )",
        "'tiſ good", "'TIS", "GONNA go", "İs it", "CANNOT!", "a  'tis  b", "a\t's b", "dogs' bone.",
        "\"Hi,\" she said.", "x ,y", "a,\n", "so:", "'' quoted ''", "(a) [b] {c} <d>", "a--b---c",
        "x — y – z", "he said: ok; fine & done @ 5% #1 $2 *", "rock'n'roll", "O'Neil's", "e.g.,",
    ]
    for sentence in [*targeted, *_atom_texts(41, 3000), *_word_texts(43, 2000)]:
        assert english.words(sentence) == nltk_words.tokenize(sentence), repr(sentence)


def test_final_mark_split_matches_nltk(nltk_english: tuple) -> None:
    _, nltk_words = nltk_english
    english = E.english()
    for base in _atom_texts(47, 1500) + _word_texts(53, 500):
        for mark in ".?!":
            sentence = base.rstrip() + "x" + mark  # a letter, then the final mark
            assert english.words(sentence) == nltk_words.tokenize(sentence), repr(sentence)


def test_punkt_context_shortcuts_match_nltk(nltk_english: tuple) -> None:
    punkt, _ = nltk_english
    english = E.english()
    rng = random.Random(59)
    before = ["ab", "Ab", "mr", "Mr", "etc", "U.S", "a", "J", "3", "x.y", "ab-cd", "é", "ab'", '"ab',
              "(ab", "ab)", "", "ſt", "..", "ab.", "K", "a b"]
    marks = [".", "?", "!", "!!", "?.", ".?"]
    after = [" ", "  ", "\n", " \n", "\t", ")", '"', "'", "?", "’"]
    following = ["The", "the", "x", "5", "A", "I", ".", ". .", "(x", "ab.", "'s", "é", "”", "J.", "-", ""]
    for _ in range(4000):
        context = "".join(rng.choice(part) for part in (before, marks, after, following))
        context += rng.choice(["", " y", ". z", "\nq"])
        assert english._contains_break(context) == punkt.text_contains_sentbreak(context), repr(context)


def test_sentence_split_matches_punkt_on_boundaries(nltk_english: tuple) -> None:
    punkt, _ = nltk_english
    english = E.english()
    texts = [" x. Y", "Very bad acting!!! I promise.", "(Sent1.) Sent2.", 'He said "No." Then left.',
             "Mr. Smith. Dr. Who", "a.\n\nb. c", "x?! y", "end.”  Next", "3.14 is pi. 2. Two"]
    for text in [*texts, *_word_texts(61, 3000), *_atom_texts(67, 1500)]:
        assert english.sentences(text) == punkt.tokenize(text), repr(text)
        ours = [(match.span(), context) for match, context in english._contexts(text)]
        theirs = [(match.span(), context) for match, context in punkt._match_potential_end_contexts(text)]
        assert ours == theirs, repr(text)


def test_scores_bit_identical_on_repetitive_tokens() -> None:
    """Counting shortcuts (sets unless both sides repeat an n-gram) give NLTK's and
    rouge_chinese's floats exactly, not just to 1e-9."""
    from nltk.translate.bleu_score import sentence_bleu
    from rouge_chinese import Rouge

    from groundscope.scoring.text import _bleu_from_tokens, _rouge_from_tokens

    rng = random.Random(71)
    weights = [(1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(1500):
            vocabulary = rng.choice(["ab", "abc", "abcdef"])
            hyp = [rng.choice(vocabulary) for _ in range(rng.randint(0, 25))]
            ref = [rng.choice(vocabulary) for _ in range(rng.randint(0, 25))]
            ours = _bleu_from_tokens(hyp, ref)
            assert [ours[k] for k in BLEU_KEYS] == [sentence_bleu([ref], hyp, weights=w) for w in weights]
            if hyp and ref:
                scores = Rouge().get_scores(" ".join(hyp), " ".join(ref))[0]
                expected = [scores[f"rouge-{n}"][s] for n in "12l" for s in "rpf"]
                assert list(_rouge_from_tokens(hyp, ref).values()) == expected, (hyp, ref)


@pytest.mark.parametrize("collocations", [True, False])
def test_sentence_shortcuts_with_trained_parameters(collocations: bool) -> None:
    """With trained parameters (as with punkt_tab installed: orthographic context,
    collocations) the sentence shortcuts still agree with Punkt."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer, PunktTrainer

    trainer = PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train(" ".join(_word_texts(3, 1500)) + " Johann S. Bach wrote. J. Bach. J. Bach.")
    params = trainer.get_params()
    assert params.ortho_context and params.collocations
    if not collocations:
        params.collocations = set()
    english, punkt = E.EnglishTokenizer(params), PunktSentenceTokenizer(params)
    for text in _word_texts(79, 1500) + _atom_texts(83, 500):
        assert english.sentences(text) == punkt.tokenize(text), repr(text)


def test_lcs_and_rouge_l_beyond_the_shift_width_match_the_references() -> None:
    """Texts longer than ``_SHIFT_WIDTH`` (1,024) tokens build their bit masks another way:
    the LCS equals the dynamic programme's and ROUGE-L rouge_chinese's there too (a wrong
    bit index in that path gave an LCS one short and no test noticed)."""
    rng = random.Random(1024)
    vocab = [f"w{i}" for i in range(12)]
    for n, m in ((1025, 1100), (1300, 40), (1100, 1030)):
        a = [rng.choice(vocab) for _ in range(n)]
        b = [rng.choice(vocab) for _ in range(m)]
        assert lcs_length(a, b) == _lcs_dp(a, b), (n, m)
    pred = " ".join(rng.choice(vocab) for _ in range(1200))
    ref = " ".join(rng.choice(vocab) for _ in range(1100))
    ours, expected = rouge(pred, ref), _rouge_oracle(pred, ref)
    for key in ("rouge-l-r", "rouge-l-p", "rouge-l-f"):
        assert ours[key] == pytest.approx(expected[key], abs=1e-9, rel=0), key
