"""Helper programs and fixtures the tests share: nothing here is a test, and no test module
imports another test module."""
