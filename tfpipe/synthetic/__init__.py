"""Generated and built-in data for tests, benchmarks and bench's default datasets."""
