"""Style-normalization checks: each kind of lost content is caught, a faithful rewrite passes."""

from __future__ import annotations

import numpy as np

from studies.protocol.normalization import (
    NORMALIZATION_PROMPT,
    NORMALIZATION_PROMPT_VERSION,
    CheckBounds,
    check_rewrite,
    clean_model_output,
    extract_citations,
    extract_names,
    extract_numbers,
    find_citation_markers,
    normalization_messages,
    prompt_sha256,
    word_diff,
)

ORIGINAL = """\
Title: Cross-Lingual Self-Verification for Low-Resource Question Answering

1. Problem Statement
Large language models answer questions in low-resource languages far less accurately \
than in English [1]. On XNLI, GPT-4 loses about 12 points of accuracy when moving from \
English to Swahili [2,3].

2. Motivation
Translating the question into English first (Shi et al. (2022)) helps, but errors in \
translation propagate. Self-consistency (Wang et al., 2023) samples several answers; it \
ignores the language of the evidence. We think a model can verify an answer by \
re-deriving it in a second language.

3. Proposed Method
We prompt the model to answer in the source language, translate its answer into English, \
and check agreement. When the two disagree, we sample 5 more answers at temperature 0.7 \
and take a majority vote.

4. Step-by-Step Experiment Plan
- Datasets: XNLI, TyDi QA and MGSM, covering 1,000 test questions per language.
- Models: GPT-4, Llama-3-8B and BLOOMZ.
- Metrics: accuracy and BLEU for the translated answers.
- Code and prompts will be released at https://github.com/example/xverify.

5. Test Case Examples
Input: "Ni nani aliandika kitabu hiki?"
Baseline output: a wrong author name.
Proposed output: the correct author, confirmed in English.

6. Fallback Plan
If agreement does not help, we analyse where translations fail, using 5% of the data \
for manual annotation.
"""

FAITHFUL = """\
## 1. Title

Cross-Lingual Self-Verification for Low-Resource Question Answering

## 2. Problem Statement

Large language models answer questions in low-resource languages much less accurately \
than in English. On XNLI, GPT-4 loses roughly 12 accuracy points when going from English \
to Swahili.

## 3. Motivation

Translating the question into English first (Shi et al., 2022) helps, but translation \
errors propagate. Self-consistency, as in Wang et al. (2023), samples several answers, but \
it ignores the language of the evidence. We expect that a model can verify an answer by \
deriving it again in a second language.

## 4. Proposed Method

The model is prompted to answer in the source language; its answer is translated into \
English and the two are checked for agreement. When they disagree, five further answers \
are sampled at temperature 0.7 and the majority answer is taken.

## 5. Step-by-Step Experiment Plan

1. Datasets: XNLI, TyDi QA and MGSM, with 1000 test questions per language.
2. Models: GPT-4, Llama-3-8B and BLOOMZ.
3. Metrics: accuracy, and BLEU for the translated answers.
4. Code and prompts will be released at https://github.com/example/xverify/.

## 6. Test Case Examples

- Input: "Ni nani aliandika kitabu hiki?"
- Baseline output: an incorrect author name.
- Proposed output: the correct author, confirmed in English.

## 7. Fallback Plan

If agreement does not help, we will analyse where translations fail, annotating 5 % of \
the data by hand.
"""


def results(rewrite: str, **kwargs) -> dict:
    return {r.name: r for r in check_rewrite(ORIGINAL, rewrite, **kwargs)}


def failed(rewrite: str, **kwargs) -> dict:
    return {n: r for n, r in results(rewrite, **kwargs).items() if not r.passed}


def test_a_faithful_rewrite_passes_every_check():
    assert failed(FAITHFUL) == {}
    assert list(results(FAITHFUL)) == [
        "numbers",
        "names",
        "urls",
        "citations",
        "citation_markers",
        "sections",
        "length",
    ]


def test_a_dropped_number_is_named():
    bad = failed(FAITHFUL.replace("temperature 0.7", "a moderate temperature"))
    assert set(bad) == {"numbers"}
    assert bad["numbers"].detail == "missing numbers: 0.7"
    assert bad["numbers"].lost == ("0.7",)


def test_thousands_separators_and_percent_spacing_do_not_count_as_changes():
    assert extract_numbers("1,000 items and 5 % of 2.5") == ["1000", "5%", "2.5"]
    assert extract_numbers("1000 items, 5% of 2.5") == ["1000", "5%", "2.5"]


def test_a_renamed_model_is_caught():
    bad = failed(FAITHFUL.replace("Llama-3-8B", "Llama-3-70B"))
    assert set(bad) == {"names", "numbers"}
    assert bad["names"].detail == "missing names: Llama-3-8B"


def test_dropped_dataset_and_metric_names_are_listed_together():
    rewrite = FAITHFUL.replace("On XNLI, GPT-4", "On a benchmark, GPT-4").replace(
        "Datasets: XNLI, ", "Datasets: "
    )
    rewrite = rewrite.replace("accuracy, and BLEU for", "accuracy, and a score for")
    assert failed(rewrite)["names"].detail == "missing names: XNLI, BLEU"


def test_a_more_specific_model_name_does_not_stand_in_for_the_original():
    bad = failed(
        FAITHFUL.replace("Models: GPT-4,", "Models: GPT-4o,").replace(
            "XNLI, GPT-4 ", "XNLI, GPT-4o "
        )
    )
    assert "GPT-4" in bad["names"].lost


def test_a_lost_url_is_caught_and_a_trailing_slash_is_not_a_change():
    assert "urls" not in failed(FAITHFUL)
    bad = failed(FAITHFUL.replace(" at https://github.com/example/xverify/.", " publicly."))
    assert bad["urls"].detail == "missing URLs: https://github.com/example/xverify"


def test_author_year_citations_may_change_form_but_not_disappear():
    assert extract_citations("as (Smith & Lee, 2021; Wu et al., 2020b) and Si et al. (2023)") == [
        ("Smith", "2021"),
        ("Wu", "2020b"),
        ("Si", "2023"),
    ]
    bad = failed(FAITHFUL.replace("(Shi et al., 2022)", "(earlier work)"))
    assert bad["citations"].detail == "missing citations: Shi (2022)"


def test_a_kept_numeric_marker_fails_the_marker_check():
    bad = failed(FAITHFUL.replace("than in English.", "than in English [3]."))
    assert set(bad) == {"citation_markers"}
    assert bad["citation_markers"].detail == "numeric citation markers left: [3]"


def test_numeric_markers_are_told_apart_from_lists_in_code_and_prompts():
    assert find_citation_markers("shown before [3, 4, 5]. Also [12].") == ["[3, 4, 5]", "[12]"]
    assert find_citation_markers("x = [1, 2]\nInput: [4, 5]\n`f([1])`") == []
    assert find_citation_markers("```\nprint(a [1])\n```") == []


def test_a_missing_section_fails_the_structure_check():
    start = FAITHFUL.index("## 7. Fallback Plan")
    bad = failed(FAITHFUL[:start])
    assert bad["sections"].detail == "missing sections: Fallback Plan"
    assert bad["sections"].lost == ("Fallback Plan",)


def test_a_shortened_rewrite_fails_the_length_bound():
    half = FAITHFUL[: len(FAITHFUL) // 2] + "\n## 7. Fallback Plan\nNone.\n"
    bad = failed(half)
    assert "ratio 0." in bad["length"].detail and "bounds 0.80\u20131.25" in bad["length"].detail


def test_bounds_can_be_set_per_study():
    tight = CheckBounds(length_ratio=(0.99, 1.01))
    assert "length" in failed(FAITHFUL, bounds=tight)


def test_similarity_is_checked_only_when_an_embedder_is_given():
    def embed(texts):
        # Two fixed directions: the original and any rewrite are 0.8 apart.
        return np.array([[1.0, 0.0], [0.8, 0.6]])[: len(texts)]

    assert "similarity" not in results(FAITHFUL)
    sim = results(FAITHFUL, embed=embed)["similarity"]
    assert not sim.passed and sim.detail == "embedding cosine 0.800 (bound 0.90)"
    assert results(FAITHFUL, embed=embed, bounds=CheckBounds(min_similarity=0.75))[
        "similarity"
    ].passed


def test_names_skip_sentence_initial_words_and_template_headings():
    names = extract_names(ORIGINAL)
    assert {"XNLI", "GPT-4", "Llama-3-8B", "BLOOMZ", "BLEU", "MGSM", "TyDi", "Swahili"} <= set(
        names
    )
    for ordinary in ("Large", "Translating", "We", "When", "Datasets", "Step-by-Step", "Input"):
        assert ordinary not in names


def test_a_changed_capitalisation_is_style_not_a_lost_name():
    assert "names" not in failed(FAITHFUL.replace("Swahili", "SWAHILI"))


def test_the_prompt_states_each_constraint_and_is_versioned():
    text = NORMALIZATION_PROMPT
    for needle in ("[3,4,5]", "author-year", "Step-by-Step Experiment Plan", "character for"):
        assert needle in text
    assert NORMALIZATION_PROMPT_VERSION.endswith("v1")
    assert len(prompt_sha256()) == 64
    assert prompt_sha256() != prompt_sha256(NORMALIZATION_PROMPT + " ")
    messages = normalization_messages("my idea")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "my idea"


def test_word_diff_marks_replaced_words_and_rebuilds_the_rewrite():
    a = "The model answers\nin English [1]."
    b = "The model replies in English."
    ops = word_diff(a, b)
    assert ("delete", "answers\n") in ops and ("insert", "replies ") in ops
    assert "".join(t for op, t in ops if op != "delete") == b
    assert " ".join("".join(t for op, t in ops if op != "insert").split()) == " ".join(a.split())


def test_word_diff_ignores_reflowed_lines():
    assert word_diff("one two\nthree", "one two three") == [("equal", "one two three")]


def test_word_diff_of_the_sample_rewrite_keeps_most_words_equal():
    ops = word_diff(ORIGINAL, FAITHFUL)
    equal = sum(len(t.split()) for op, t in ops if op == "equal")
    assert equal / len(FAITHFUL.split()) > 0.6


def test_title_case_labels_before_a_colon_are_not_names():
    text = "- Step 2: Construct Prompts: zero-shot and CoT.\n- Step 3: Select Models: GPT-4."
    assert extract_names(text) == ["CoT", "GPT-4"]


def test_a_fence_around_the_whole_reply_is_removed_but_inner_fences_stay():
    assert clean_model_output("```markdown\n## 1. Title\nT\n```\n") == "## 1. Title\nT"
    inner = "## 6. Test Case Examples\n```\nprompt\n```"
    assert clean_model_output(inner) == inner
