"""Complaints for the search-by-meaning tests: three say the same thing in other words, the rest say other things."""

SUITE_COMPLAINTS = [
    "It claimed the test suite passed but the tests were never run",
    "Said every test passes, yet it never executed the test suite",
    "Told me the whole suite passed when no test had run",
]
OTHER_COMPLAINTS = [
    "The agent edited the wrong file",
    "It changed a different file than the one I asked about",
    "Asks for clarification far too often",
    "The answer took minutes to arrive",
    "Made up a library function that does not exist",
]
