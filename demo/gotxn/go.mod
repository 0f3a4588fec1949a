module gotxn

go 1.19

require gobroadcast v0.0.0

replace gobroadcast => ../gobroadcast
