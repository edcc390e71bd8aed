; Context captures for Go (see __init__.py for what each capture means).
(package_clause) @import
(import_declaration) @import

(function_declaration) @definition.function
(method_declaration) @definition.method
(type_declaration) @definition.type

(comment) @comment
(interpreted_string_literal) @string
(raw_string_literal) @string
(rune_literal) @string
