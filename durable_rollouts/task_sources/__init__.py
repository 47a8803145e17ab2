"""Task sources: dataset rows read into TaskSpec, checked against the limits a row must meet."""
