"""tree-sitter queries, one `<name>.<kind>.scm` file per grammar and kind (data, loaded by
`waferline.syntax.languages.load_query` through importlib.resources; a package so that they ship).

`<name>.context.scm`: `@import` (a statement that brings names in), `@definition.<kind>` (a definition a completion
may need to see: function, method, class, type, module), `@comment`, `@string` (no completion inside unless invoked),
and `@code` (code nested inside a string, such as an f-string interpolation, where completing is fine again).

`<name>.tags.scm`: what the repository index stores (capture conventions at the top of python.tags.scm):
`@definition.<kind>` with `@name`, `@reference.<kind>`, and `@receiver` / `@scope` where a language needs them.
"""
