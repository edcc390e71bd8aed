; Context captures for Rust (see __init__.py for what each capture means).
(use_declaration) @import
(extern_crate_declaration) @import

(function_item) @definition.function
(impl_item) @definition.class
(trait_item) @definition.class
(struct_item) @definition.type
(enum_item) @definition.type
(type_item) @definition.type
(mod_item) @definition.module
(macro_definition) @definition.function

(line_comment) @comment
(block_comment) @comment
(string_literal) @string
(raw_string_literal) @string
(char_literal) @string
