"""The README and the suites say true things about the tree: its layout names every folder and
module that exists and none that does not, its links resolve, and a suite's description counts
what the suite holds."""

import re
import tomllib
from pathlib import Path

import pytest

from pytest_webbench.design.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pytest_webbench"
README = (ROOT / "README.md").read_text()


def _layout_block() -> str:
    section = README.split("## Layout", 1)[1]
    return section.split("```", 2)[1]


def _layout_entries() -> dict[str, list[str]]:
    """Each package folder of the layout block with the module names written beside it."""
    entries: dict[str, list[str]] = {}
    current = None
    for line in _layout_block().splitlines():
        head = re.match(r"^  (\w+)/\s", line)
        if head:
            current = head.group(1)
            entries[current] = []
        elif re.match(r"^\S", line):
            current = None  # a top-level folder of the checkout, not the package
        if current:
            entries[current] += re.findall(r"\b(\w+)\.(?:py|js)\b", line)
    return entries


def test_the_layout_names_every_package_folder_and_nothing_else():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert set(_layout_entries()) == folders
    top_modules = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    # the hooks, and the process's one event loop, which trial/ and review/ both serve on and which
    # imports nothing of the package (under trial/, review/ would import above its floor)
    assert top_modules == {"plugin.py", "service_loop.py"}, "only plugin.py and service_loop.py stand at the package's top"


def test_every_module_the_layout_names_exists_and_every_module_is_named():
    for folder, names in _layout_entries().items():
        here = {p.stem for p in (PACKAGE / folder).glob("*.py") if p.stem not in ("__init__",)}
        here |= {p.stem for p in (PACKAGE / folder).glob("*.js")}
        assert set(names) <= here | {"__main__"}, f"{folder}/: the README names modules that are not there"
        missing = {n for n in here if n != "__main__"} - set(names)
        assert not missing, f"{folder}/: the README's layout leaves out {sorted(missing)}"


def test_every_package_folder_says_what_it_is():
    for init in PACKAGE.glob("*/__init__.py"):
        text = init.read_text().strip()
        assert text.startswith('"""'), f"{init.relative_to(ROOT)} has no docstring saying what the folder is"


@pytest.mark.parametrize("doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_links_between_the_docs_resolve(doc):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # a URL
        assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which is not there"


def test_the_readme_is_a_guide_not_a_log():
    for word in ("session", "Session"):
        hits = [line for line in README.splitlines() if re.search(rf"\b{word}\b(?! (id|cookie))", line)
                and "browser session" not in line and "MCP session" not in line]
        assert not hits, hits


NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16}


@pytest.mark.parametrize("name", ["local-web", "public-web"])
def test_a_suite_s_description_counts_what_it_holds(name):
    path = ROOT / "suites" / name
    description = tomllib.loads((path / "suite.toml").read_text())["description"].lower()
    suite = load_suite(path)
    counts = {"tasks": len(suite.tasks), "sites": len(suite.spec.sites)}
    said = re.findall(rf"\b({'|'.join(NUMBERS)})\b [\w\s-]*?\b(tasks|sites)\b", description)
    assert said, f"{name}'s description counts nothing"
    for word, what in said:
        assert NUMBERS[word] == counts[what], f"{name}'s description says {word} {what}; it has {counts[what]}"
