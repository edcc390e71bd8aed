; Context captures for C++ (see __init__.py for what each capture means).
(preproc_include) @import
(using_declaration) @import

(function_definition) @definition.function
(class_specifier body: (_)) @definition.class
(struct_specifier body: (_)) @definition.class
(enum_specifier body: (_)) @definition.type
(type_definition) @definition.type
(namespace_definition) @definition.module
(template_declaration) @definition.template

(comment) @comment
(string_literal) @string
(raw_string_literal) @string
(char_literal) @string
(system_lib_string) @string
