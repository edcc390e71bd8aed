; Tag queries for Python. Captures:
;   @definition.<kind> the whole definition, with @name its name node
;   @reference.<kind>  the name node of a use (call, class, type, import)
; Docstrings, signatures and methods (functions inside classes) are derived in code from these nodes.

(function_definition name: (identifier) @name) @definition.function
(class_definition name: (identifier) @name) @definition.class

; module-level names: `X = ...`, `X: int = ...`
(module (expression_statement (assignment left: (identifier) @name) @definition.variable))

(call function: (identifier) @reference.call)
(call function: (attribute attribute: (identifier) @reference.call))
(decorator (identifier) @reference.call)
(decorator (call function: (identifier) @reference.call))
(decorator (attribute attribute: (identifier) @reference.call))
(class_definition superclasses: (argument_list (identifier) @reference.class))
(class_definition superclasses: (argument_list (attribute attribute: (identifier) @reference.class)))
(type (identifier) @reference.type)
(import_from_statement name: (dotted_name (identifier) @reference.import))
(import_from_statement name: (aliased_import name: (dotted_name (identifier) @reference.import)))
