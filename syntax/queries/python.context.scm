; Context captures for Python (see __init__.py for what each capture means).
(import_statement) @import
(import_from_statement) @import
(future_import_statement) @import

(function_definition) @definition.function
(class_definition) @definition.class
(decorated_definition) @definition.decorated

(comment) @comment
(string) @string
(interpolation) @code
