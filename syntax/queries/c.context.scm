; Context captures for C (see __init__.py for what each capture means).
(preproc_include) @import

(function_definition) @definition.function
(struct_specifier body: (_)) @definition.type
(enum_specifier body: (_)) @definition.type
(type_definition) @definition.type

(comment) @comment
(string_literal) @string
(char_literal) @string
(system_lib_string) @string
