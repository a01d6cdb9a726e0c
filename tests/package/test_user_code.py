"""The one loader of user code named as FILE.py:NAME or MODULE:NAME."""

import sys

import pytest

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.user_code import load_object


def test_a_relative_file_is_taken_from_the_base_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mine.py").write_text("def factory():\n    return 42\n")
    factory = load_object("sub/mine.py:factory", parameter="model", base=tmp_path)
    assert factory() == 42
    # kept in sys.modules, so the audit's fingerprint can read its source
    assert sys.modules[factory.__module__].__file__.endswith("mine.py")


def test_a_module_name_is_imported():
    assert load_object("math:sqrt", parameter="loss")(4.0) == 2.0


@pytest.mark.parametrize("spec, message", [
    ("nocolon", "model must be 'FILE.py:NAME'"),
    ("file.py:", "model must be 'FILE.py:NAME'"),
    (3, "model must be a string"),
    ("missing.py:f", "model: no such file"),
    ("no_such_module_anywhere:f", "model: cannot import 'no_such_module_anywhere'"),
    ("math:nothing", "model: 'math' has no name 'nothing'"),
])
def test_bad_references_name_the_parameter_and_the_value(tmp_path, spec, message):
    with pytest.raises(ParameterError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_object(spec, parameter="model", base=tmp_path)


def test_a_module_that_fails_to_import_says_so(tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ParameterError, match="loss: importing .*broken.py' failed: RuntimeError: boom"):
        load_object("broken.py:f", parameter="loss", base=tmp_path)
