"""The judge: rules from evidence to an outcome, expectations against findings (verdict), baselines."""
