"""The chaos suite (issue 14): every process under load, faults at random, invariants from the record."""
