; Context captures for JavaScript and JSX (see __init__.py for what each capture means).
(import_statement) @import
(lexical_declaration
  (variable_declarator
    value: (call_expression function: (identifier) @_require (#eq? @_require "require")))) @import

(function_declaration) @definition.function
(generator_function_declaration) @definition.function
; (two patterns: an alternation under a field also matched `let x = 0` in tree-sitter 0.25)
(lexical_declaration (variable_declarator value: (arrow_function))) @definition.function
(lexical_declaration (variable_declarator value: (function_expression))) @definition.function
(class_declaration) @definition.class
(method_definition) @definition.method

(comment) @comment
(string) @string
(template_string) @string
(regex) @string
(template_substitution) @code
