; inherits: javascript
; Context captures for TypeScript and TSX: JavaScript's, and the definitions only TypeScript has (see __init__.py for
; what each capture means).
(abstract_class_declaration) @definition.class
(interface_declaration) @definition.type
(type_alias_declaration) @definition.type
(enum_declaration) @definition.type
(internal_module) @definition.module
