"""The tests' helpers, one module a concern (importable as `support.<module>`: pyproject puts tests/
on sys.path). No test module imports another; what two test modules share lives here."""
