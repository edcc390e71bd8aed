; inherits: typescript
; Context captures for TSX: TypeScript's (see __init__.py for what each capture means).
