; Tag queries for C. Capture conventions: see python.tags.scm. Prototypes in headers count as definitions
; because that is where C libraries keep their documentation comments.

(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @definition.function
; prototypes at file level only: inside a function `T x(a, b);` is usually a variable
(translation_unit (declaration declarator: (function_declarator declarator: (identifier) @name)) @definition.function)
(translation_unit
  (declaration declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @definition.function)
(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @definition.enum
(type_definition declarator: (type_identifier) @name) @definition.type
(preproc_function_def name: (identifier) @name) @definition.macro
(preproc_def name: (identifier) @name) @definition.macro

(call_expression function: (identifier) @reference.call)
(call_expression function: (field_expression field: (field_identifier) @reference.call))
(type_identifier) @reference.type
