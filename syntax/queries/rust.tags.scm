; Tag queries for Rust. Capture conventions: see python.tags.scm; @scope with @name is an impl block: not a
; definition itself, but the functions inside it are methods of that type.

(function_item name: (identifier) @name) @definition.function
(function_signature_item name: (identifier) @name) @definition.method
(struct_item name: (type_identifier) @name) @definition.struct
(union_item name: (type_identifier) @name) @definition.struct
(enum_item name: (type_identifier) @name) @definition.enum
(trait_item name: (type_identifier) @name) @definition.interface
(type_item name: (type_identifier) @name) @definition.type
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.variable
(mod_item name: (identifier) @name) @definition.module
(macro_definition name: (identifier) @name) @definition.macro
(impl_item type: (type_identifier) @name) @scope
(impl_item type: (generic_type type: (type_identifier) @name)) @scope

(call_expression function: (identifier) @reference.call)
(call_expression function: (field_expression field: (field_identifier) @reference.call))
(call_expression function: (scoped_identifier name: (identifier) @reference.call))
(macro_invocation macro: (identifier) @reference.call)
(impl_item trait: (type_identifier) @reference.class)
(struct_expression name: (type_identifier) @reference.class)
(type_identifier) @reference.type
