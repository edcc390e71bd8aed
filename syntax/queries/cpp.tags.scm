; Tag queries for C++. Capture conventions: see python.tags.scm. `int Point::x() {...}` is a method of Point.

(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @definition.function
(function_definition declarator: (reference_declarator (function_declarator declarator: (identifier) @name))) @definition.function
(function_definition declarator: (function_declarator declarator: (field_identifier) @name)) @definition.method
(function_definition
  declarator: (function_declarator declarator: (qualified_identifier scope: (_) @receiver name: (identifier) @name))) @definition.method
; prototypes at file or namespace level only: inside a function `Matrix out(a, b);` declares a variable
(translation_unit (declaration declarator: (function_declarator declarator: (identifier) @name)) @definition.function)
(declaration_list (declaration declarator: (function_declarator declarator: (identifier) @name)) @definition.function)
(field_declaration declarator: (function_declarator declarator: (field_identifier) @name)) @definition.method
(class_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.class
(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @definition.enum
(type_definition declarator: (type_identifier) @name) @definition.type
(alias_declaration name: (type_identifier) @name) @definition.type
(namespace_definition name: (namespace_identifier) @name) @definition.module
(preproc_function_def name: (identifier) @name) @definition.macro
(preproc_def name: (identifier) @name) @definition.macro

(call_expression function: (identifier) @reference.call)
(call_expression function: (field_expression field: (field_identifier) @reference.call))
(call_expression function: (qualified_identifier name: (identifier) @reference.call))
(new_expression type: (type_identifier) @reference.class)
(base_class_clause (type_identifier) @reference.class)
(type_identifier) @reference.type
