; Context captures for Java (see __init__.py for what each capture means).
(package_declaration) @import
(import_declaration) @import

(class_declaration) @definition.class
(interface_declaration) @definition.class
(enum_declaration) @definition.class
(record_declaration) @definition.class
(method_declaration) @definition.method
(constructor_declaration) @definition.method

(line_comment) @comment
(block_comment) @comment
(string_literal) @string
(character_literal) @string
