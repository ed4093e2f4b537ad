"""House rules the code base keeps: test modules share builders through `tests/factories.py`
and fixtures through `conftest.py`, never by importing one another; code comments and
docstrings cite nothing outside the repository and no issue numbers; no class shares its
name with a model; every benchmark has a smoke run that CI calls."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
CODE_PACKAGES = ("ideareview", "llm", "accounts", "studies", "judging")


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """Every module `module` imports, relative imports resolved against its package."""
    package = module.rsplit(".", 1)[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.append((node.lineno, base))
            # `from tests.e2e import test_review_flow` imports a module by name.
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _is_test_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "tests" and parts[-1].startswith("test_")


def test_no_test_module_imports_another_test_module():
    offenders = []
    for path in sorted(TESTS.rglob("test_*.py")):
        module = _module_name(path)
        for line, name in _imported_modules(path.read_text(encoding="utf-8"), module):
            if _is_test_module(name) and name != module:
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not offenders, "move shared builders to tests/factories.py:\n" + "\n".join(offenders)


def test_the_import_check_resolves_relative_and_module_imports():
    """The check above must not pass by failing to resolve an import."""
    source = (
        "from .test_lmm_sparse import simulate\n"
        "from tests.e2e import test_review_flow\n"
        "from tests.factories import make_review_study\n"
    )
    names = {name for _, name in _imported_modules(source, "tests.analysis.test_example")}
    assert "tests.analysis.test_lmm_sparse" in names
    assert "tests.e2e.test_review_flow" in names
    assert _is_test_module("tests.analysis.test_lmm_sparse")
    assert not _is_test_module("tests.factories")
    assert not _is_test_module("tests.e2e.conftest")


FORBIDDEN_IN_CODE = [
    (re.compile(r"DESIGN\.md"), "cites a design file outside the repository"),
    (re.compile(r"\bissues? #?\d+", re.IGNORECASE), "cites an issue number"),
    (re.compile(r"(?<![\w&])#\d+\b(?!\w)"), "cites an issue number"),
    (re.compile(r"shared/seeds|\b\d{3}_[0-9a-f]{16}\.txt"), "cites a seed file by name"),
]


def _comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """Each comment and each docstring of a module, with its first line number."""
    texts = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        docstring = ast.get_docstring(node, clean=False)
        if docstring is not None:
            texts.append((node.body[0].lineno, docstring))
    return texts


def test_code_cites_no_design_file_issue_number_or_seed_file():
    offenders = []
    for package in CODE_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for line, text in _comments_and_docstrings(path.read_text(encoding="utf-8")):
                for pattern, why in FORBIDDEN_IN_CODE:
                    if pattern.search(text):
                        offenders.append(f"{path.relative_to(ROOT)}:{line} {why}")
    assert not offenders, "\n".join(offenders)


def test_the_code_scan_catches_each_forbidden_citation():
    samples = [
        "See DESIGN.md, style 3.",
        "Added for issue 7.",
        "fixes #12",
        "as in shared/seeds/003_e8d1a5549747f8f5.txt",
    ]
    for sample in samples:
        assert any(p.search(sample) for p, _ in FORBIDDEN_IN_CODE), sample
    for fine in ["colour #fff", "row 12 of the file", "&#8212;", "the 7-section template"]:
        assert not any(p.search(fine) for p, _ in FORBIDDEN_IN_CODE), fine


def _choice_constraints(model) -> dict[str, set[str]]:
    """field → the values a `field__in=[…]` CheckConstraint of the model allows."""
    from django.db import models

    found: dict[str, set[str]] = {}
    for constraint in model._meta.constraints:
        if not isinstance(constraint, models.CheckConstraint):
            continue
        for child in constraint.condition.children:
            if isinstance(child, tuple) and child[0].endswith("__in"):
                found[child[0].removesuffix("__in")] = set(child[1])
    return found


def test_every_choice_field_is_held_to_its_choices_by_the_database():
    from django.apps import apps
    from django.db import models

    problems = []
    for label in ("llm", "accounts", "studies", "judging"):
        for model in apps.get_app_config(label).get_models():
            allowed = _choice_constraints(model)
            for field in model._meta.fields:
                if not (field.choices and isinstance(field, models.CharField)):
                    continue
                values = {str(value) for value, _ in field.flatchoices}
                where = f"{model.__name__}.{field.name}"
                if field.name not in allowed:
                    problems.append(f"{where} has no CheckConstraint on its choices")
                elif allowed[field.name] != values:
                    problems.append(f"{where}: constraint {allowed[field.name]} != {values}")
    assert not problems, "\n".join(problems)


def test_the_database_refuses_inverted_ranges_and_a_judge_without_concurrency(db, owner):
    from django.db import IntegrityError, transaction

    from llm.models import JudgeConfig
    from studies.models import Study
    from studies.services.study import study_create

    study = study_create(owner=owner, slug="ranges", title="Ranges")
    for field, value in [
        ("min_load", 8),
        ("min_reviews_per_idea", 5),
        ("status", "archived"),
    ]:
        with pytest.raises(IntegrityError), transaction.atomic():
            Study.objects.filter(pk=study.pk).update(**{field: value})
    for field, value in [("concurrency", 0), ("max_attempts", 0), ("timeout_seconds", 0)]:
        with pytest.raises(IntegrityError), transaction.atomic():
            JudgeConfig.objects.create(name=f"bad-{field}", **{field: value})


_CLASS_FACTORIES = {"NamedTuple", "namedtuple", "make_dataclass", "TypedDict", "type"}


def _classes_defined(source: str) -> list[tuple[int, str]]:
    """Every class a module defines, with `class` or with a class factory call
    (`X = NamedTuple("X", …)`), at any depth."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in _CLASS_FACTORIES:
                found += [(node.lineno, t.id) for t in node.targets if isinstance(t, ast.Name)]
    return found


def _name_clashes(model_homes: dict[str, str], sources: dict[str, str]) -> list[str]:
    """Classes named like a model but defined outside the model's own module."""
    clashes = []
    for module, source in sources.items():
        for line, name in _classes_defined(source):
            if name in model_homes and model_homes[name] != module:
                clashes.append(f"{module}:{line} defines {name}, a model in {model_homes[name]}")
    return clashes


def test_no_class_shares_its_name_with_a_model():
    """A model, a dataclass and a form never share a name: `Idea` is the row, what the
    solver is given is `IdeaInput`, what a form validates is an `…Form`."""
    from django.apps import apps

    model_homes = {
        model.__name__: model.__module__
        for label in ("llm", "accounts", "studies", "judging")
        for model in apps.get_app_config(label).get_models(include_auto_created=False)
    }
    sources = {
        _module_name(path): path.read_text(encoding="utf-8")
        for package in CODE_PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }
    clashes = _name_clashes(model_homes, sources)
    assert not clashes, "rename the non-model class:\n" + "\n".join(clashes)


def test_the_name_check_catches_a_dataclass_a_form_and_a_named_tuple():
    homes = {"Idea": "studies.models", "Review": "studies.models", "Topic": "studies.models"}
    sources = {
        "studies.models": "class Idea(models.Model): pass\nclass Review(models.Model): pass",
        "studies.protocol.x": "@dataclass\nclass Idea:\n    id: str",
        "studies.forms": "class Review(forms.Form): pass",
        "studies.analysis.y": "def f():\n    Topic = typing.NamedTuple('Topic', [])",
    }
    clashes = _name_clashes(homes, sources)
    assert [c.split(" ")[0] for c in clashes] == [
        "studies.protocol.x:2",
        "studies.forms:1",
        "studies.analysis.y:2",
    ]


BENCH = ROOT / "bench"


def _declares_smoke(source: str) -> bool:
    """Whether the script's argument parser has a `--smoke` option."""
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and any(isinstance(a, ast.Constant) and a.value == "--smoke" for a in node.args)
        ):
            return True
    return False


def test_every_benchmark_has_a_smoke_run_that_ci_calls():
    """`make bench-smoke` runs `bench/*.py --smoke` in CI: a script without the option
    would fail there, and one CI does not run could rot unnoticed."""
    scripts = sorted(BENCH.glob("*.py"))
    assert scripts
    missing = [p.name for p in scripts if not _declares_smoke(p.read_text(encoding="utf-8"))]
    assert not missing, f"bench scripts without --smoke: {missing}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = makefile.split("\nbench-smoke:", 1)[1].split("\n\n", 1)[0]
    assert "scripts/bench-smoke" in target
    runner = (ROOT / "scripts" / "bench-smoke").read_text(encoding="utf-8")
    assert "bench/*.py" in runner and "--smoke" in runner and "exit 1" in runner
    assert "make bench-smoke" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_smoke_check_tells_an_option_from_a_mention():
    assert _declares_smoke('ap.add_argument("--smoke", action="store_true")')
    assert not _declares_smoke('ap.add_argument("--sizes")\nprint("--smoke")')


# Names every Django project or module defines by convention, and names bound by
# re-binding another name (`Method = JudgeRun.Method`), are not definitions.
CONVENTIONAL_NAMES = {"app_name", "urlpatterns", "application", "register", "log", "T", "Id"}


def _top_level_definitions(roots: tuple[str, ...]) -> dict[str, list[str]]:
    """Public top-level name → the app modules that define it (classes, functions and
    assignments of a value; re-bindings of another name are not definitions)."""
    found: dict[str, list[str]] = {}
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            if {"migrations", "management"} & set(path.parts):
                continue
            for node in ast.parse(path.read_text()).body:
                names: list[str] = []
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Assign | ast.AnnAssign) and not isinstance(
                    node.value, ast.Name | ast.Attribute | None
                ):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [t.id for t in targets if isinstance(t, ast.Name)]
                for name in names:
                    if not name.startswith("_") and name not in CONVENTIONAL_NAMES:
                        found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_public_top_level_name_has_one_meaning():
    defined = _top_level_definitions(("ideareview", "llm", "studies", "judging"))
    clashes = {name: homes for name, homes in defined.items() if len(homes) > 1}
    assert not clashes, "one name, one meaning: rename one of\n" + "\n".join(
        f"{name}: {', '.join(homes)}" for name, homes in sorted(clashes.items())
    )


def _recipes() -> dict[str, str]:
    """The recipes of docs/architecture.md ("Where to add things"), by heading."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## Where to add things", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^### (.+)$", section, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_file_a_recipe_names_exists():
    recipes = _recipes()
    assert {"A review metric", "A judge method", "An export format"} <= set(recipes)
    for title, text in recipes.items():
        for path in re.findall(r"`([\w./-]+\.(?:py|md|html))`", text):
            if "/" in path:
                assert (ROOT / path).exists(), f"{title}: {path} does not exist"


def test_a_recipe_edits_no_more_files_than_it_promises():
    """Numbered steps are the files a newcomer edits (tests and migrations aside)."""
    steps = {t: len(re.findall(r"^\d+\. ", x, flags=re.MULTILINE)) for t, x in _recipes().items()}
    assert steps["A judge method"] <= 3
    assert steps["A review metric"] <= 2
    assert steps["An export format"] <= 3


APP_TEMPLATE_DIRS = [
    ROOT / "templates",
    ROOT / "studies" / "templates",
    ROOT / "judging" / "templates",
]
BARE_TABLE = re.compile(r"<table(?![^>]*\bclass=\"[^\"]*\btable\b)[^>]*>")


def _bare_tables(text: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in BARE_TABLE.finditer(text)]


def test_every_table_on_an_app_page_wears_the_app_table_style():
    """The report's own file styles its tables itself (`report_document.html` and the
    `_report_*` sections it includes); every other table is drawn by the app's CSS."""
    problems = []
    for path in sorted(p for d in APP_TEMPLATE_DIRS for p in d.rglob("*.html")):
        if path.name == "report_document.html" or path.name.startswith("_report"):
            continue
        problems += [f"{path.relative_to(ROOT)}:{n}" for n in _bare_tables(path.read_text())]
    assert not problems, 'tables without class="table …":\n' + "\n".join(problems)


def test_the_table_scan_tells_a_styled_table_from_a_bare_one():
    assert _bare_tables('<table id="x">\n<table class="table compact" id="y">') == [1]
    assert _bare_tables('<table class="tablet">') == [1]
