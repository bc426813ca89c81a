"""Releasing a kernel (plan -> guard -> execute) and reading what was released: the API check,
`kbuild verify`, and pull-request staging."""
