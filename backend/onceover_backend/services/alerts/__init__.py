"""Alert rules, what each sees in the stored data, and the evaluator that moves each
alert through its states (and makes its deliveries)."""
