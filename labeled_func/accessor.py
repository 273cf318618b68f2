"""The ``.func`` accessor on DataArray, Dataset and DataTree."""
