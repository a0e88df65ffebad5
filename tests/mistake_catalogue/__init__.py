"""Right and wrong answers to the course notebooks, as data for the grading tests."""
