"""Test-suite configuration: pytester for the plugin tests."""

pytest_plugins = ["pytester"]
