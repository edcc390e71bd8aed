; Tag queries for JavaScript (also used for .jsx). Capture conventions: see python.tags.scm.

(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(class_declaration name: (identifier) @name) @definition.class
(method_definition name: (property_identifier) @name) @definition.method

; `const f = (...) => ...` and `const f = function () {}` are functions
(variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression)]) @definition.function

; other top-level bindings, exported or not
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (export_statement declaration: (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable)))

(call_expression function: (identifier) @reference.call)
(call_expression function: (member_expression property: (property_identifier) @reference.call))
(new_expression constructor: (identifier) @reference.class)
(class_heritage (identifier) @reference.class)
(import_specifier name: (identifier) @reference.import)
(jsx_opening_element name: (identifier) @reference.call)
(jsx_self_closing_element name: (identifier) @reference.call)
