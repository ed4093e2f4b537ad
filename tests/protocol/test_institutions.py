import pytest

from studies.protocol.institutions import (
    institution_from_email,
    institution_keys,
    normalize_institution,
    register_alias,
    same_institution,
)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Stanford", "Stanford University"),
        ("stanford univ.", "The Stanford University"),
        ("STANFORD UNIVERSITY", "Stanford University, Dept. of Computer Science"),
        ("MIT", "Massachusetts Institute of Technology"),
        ("M.I.T.", "mit"),
        ("Univ. of Maryland", "University of Maryland, College Park"),
        ("UC Berkeley", "University of California, Berkeley"),
        ("U.C. Berkeley", "Berkeley"),
        ("Carnegie-Mellon University", "CMU"),
        ("Université de Montréal", "Universite de Montreal"),
    ],
)
def test_spellings_of_one_institution_share_a_key(a, b):
    assert same_institution(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Washington University in St. Louis", "University of Washington"),
        ("Stanford", "Princeton University"),
        ("", ""),
        ("UT Austin", "UC Berkeley"),
    ],
)
def test_different_institutions_do_not_match(a, b):
    assert not same_institution(a, b)


@pytest.mark.parametrize(
    ("email", "key"),
    [
        ("jane@cs.stanford.edu", "stanford"),
        ("jane@stanford.edu", "stanford"),
        ("bob@csail.mit.edu", "mit"),
        ("al@eecs.berkeley.edu", "berkeley"),
        ("x@cs.ox.ac.uk", "oxford"),
        ("y@utexas.edu", "ut austin"),
        ("z@gmail.com", None),
        ("not an address", None),
    ],
)
def test_email_domains_name_the_institution(email, key):
    assert institution_from_email(email) == key


def test_reviewer_keys_combine_institution_and_email():
    keys = institution_keys(["Massachusetts Institute of Technology"], ["a@cs.stanford.edu"])
    assert keys == {"mit", "stanford"}
    assert institution_keys([""], ["a@gmail.com"]) == frozenset()


def test_alias_table_can_be_extended():
    assert normalize_institution("Ideareview Test Lab") != normalize_institution("IRTL")
    register_alias("IRTL", "Ideareview Test Lab")
    assert normalize_institution("IRTL") == normalize_institution("Ideareview Test Lab")
