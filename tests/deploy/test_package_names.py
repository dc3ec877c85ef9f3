"""Our top-level packages share no name with another installed distribution's: transformers (5.x) depends on
Hugging Face's ``kernels`` package, so a top-level ``kernels`` of ours shadowed it inside the repository
(transformers then failed to import) and was shadowed by it everywhere else. Checked on the installed
environment, so a new dependency that brings a clashing name fails here, not in a model test."""

import importlib.metadata as md
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def our_top_level_packages():
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    names = {pattern.rstrip("*") for pattern in include}
    assert all((ROOT / name / "__init__.py").is_file() for name in names), names
    return names


def test_no_top_level_package_of_ours_is_another_distributions():
    owners = md.packages_distributions()
    clashes = {
        name: sorted(set(owners[name]) - {"rmsnorm-dashboard", "rmsnorm_dashboard"})
        for name in our_top_level_packages()
        if name in owners
    }
    assert not {name: dists for name, dists in clashes.items() if dists}, clashes


def test_the_kernels_package_is_ours_under_its_own_name():
    import rmsnorm_kernels

    assert pathlib.Path(rmsnorm_kernels.__file__).resolve().parent == ROOT / "rmsnorm_kernels"
    assert not (ROOT / "kernels").exists()
