; Tag queries for Java. Capture conventions: see python.tags.scm.

(class_declaration name: (identifier) @name) @definition.class
(interface_declaration name: (identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(record_declaration name: (identifier) @name) @definition.class
(annotation_type_declaration name: (identifier) @name) @definition.interface
(method_declaration name: (identifier) @name) @definition.method
(constructor_declaration name: (identifier) @name) @definition.method

(method_invocation name: (identifier) @reference.call)
(object_creation_expression type: (type_identifier) @reference.class)
(superclass (type_identifier) @reference.class)
(super_interfaces (type_list (type_identifier) @reference.class))
(type_identifier) @reference.type
