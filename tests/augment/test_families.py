"""The augment package's modules: each is a family of augmenters or one of the named shared parts."""
from __future__ import annotations

import pkgutil

import cselab.augment as augment


def test_the_modules_that_are_not_families_exist():
    modules = {module.name for module in pkgutil.iter_modules(augment.__path__)}
    assert augment.NOT_FAMILIES <= modules, sorted(augment.NOT_FAMILIES - modules)


def test_every_family_registers_an_augmenter():
    augment.load_all()
    families = {m.name for m in pkgutil.iter_modules(augment.__path__)} - augment.NOT_FAMILIES
    registering = {augment.AUGMENTERS.get(name).__module__.rsplit(".", 1)[1] for name in augment.AUGMENTERS}
    assert families - set(augment.UNAVAILABLE_FAMILIES) <= registering
