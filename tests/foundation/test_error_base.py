"""One base class for users' errors: every exception class cselab defines is a CselabError (printed as
one line, exit 2) or an OSError about a path; the command line shows anything else as a bug."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import cselab
from cselab import cli
from cselab.errors import ConfigError, CselabError


def cselab_exception_classes() -> list[type]:
    found = []
    for module_info in pkgutil.walk_packages(cselab.__path__, "cselab."):
        try:
            module = importlib.import_module(module_info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        found += [value for value in vars(module).values() if inspect.isclass(value)
                  and issubclass(value, BaseException) and value.__module__ == module.__name__]
    return found


# Raised and caught inside one command to unwind it (a sweep stopped by a signal), never shown as an error.
CONTROL_FLOW = {"SweepStopped"}


def test_every_cselab_exception_is_a_user_error():
    classes = cselab_exception_classes()
    assert len(classes) >= 10
    assert [c.__name__ for c in classes
            if not issubclass(c, (CselabError, OSError)) and c.__name__ not in CONTROL_FLOW] == []


@pytest.mark.parametrize(("error", "code"), [(ConfigError("recipe: bad key 'x'"), 2), (ValueError("a bug"), 1)])
def test_cli_prints_user_errors_in_one_line_and_bugs_with_a_traceback(monkeypatch, capsys, error, code):
    def fail(args):
        raise error

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    args = parser.parse_args(["recipes"])
    monkeypatch.setattr(parser, "parse_args", lambda argv=None: args)
    monkeypatch.setattr(args, "func", fail)
    assert cli.main(["recipes"]) == code
    err = capsys.readouterr().err
    assert ("Traceback" in err) == (code == 1)
