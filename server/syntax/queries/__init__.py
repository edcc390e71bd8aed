"""Context queries, one `.scm` file per grammar (data, loaded with importlib.resources by `tree.load_query`).

Captures: `@import` (a statement that brings names in), `@definition.<kind>` (a definition a completion may need to
see: function, method, class, type, module), `@comment`, `@string` (no completion inside unless invoked), and
`@code` (code nested inside a string, such as an f-string interpolation, where completing is fine again).
"""
