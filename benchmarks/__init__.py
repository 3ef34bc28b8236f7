"""Scripts that measure the app and print a table and one JSON line with the machine; never run by the test suite."""
